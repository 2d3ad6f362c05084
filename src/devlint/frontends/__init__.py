"""What users run: the command line (`cli`), the language server (`server`), the flake8 plugin
(`flake8_plugin`), the output formats (`output`), `devlint explain` (`explain`) and the rule docs
(`docs`). `devlint confirm` and `devlint export` are in `devlint.confirm`."""
