"""What every layer shares: findings and fixes as data (`findings`), positions in a text
(`positions`), libcst helpers (`syntax`) and the edits fixes are made of (`edits`). Imports
nothing of devlint's but itself."""
