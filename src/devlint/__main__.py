from devlint.frontends.cli import main

raise SystemExit(main())
