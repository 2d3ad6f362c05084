"""MkDocs hook: the rule pages are `rules/DEVNNN.md` at the repository root, the one place a
rule's prose lives (they ship in the package and `devlint rule` prints them). The site takes
them as they are, under `rules/`, lists them under Rules in the navigation, and gives
`rules/index.md` a table of them made from the rule classes."""
from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
RULE_DOCS = sorted((ROOT / "rules").glob("DEV[0-9][0-9][0-9].md"))


def on_config(config):
    for section in config["nav"]:
        if isinstance(section, dict) and "Rules" in section:
            section["Rules"] += [f"rules/{doc.name}" for doc in RULE_DOCS]
    return config


def on_files(files, config):
    for doc in RULE_DOCS:
        files.append(File(f"rules/{doc.name}", src_dir=str(ROOT), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != "rules/index.md":
        return markdown
    from devlint.frontends import docs
    from devlint.rules import ALL_RULES

    rows = ["| code | name | flags | fix |", "|---|---|---|---|"]
    rows += [f"| [{rule.code}]({rule.code}.md) | {rule.name} | {rule.summary} | {docs.fix_availability(rule.code)} |"
             for rule in ALL_RULES]
    return markdown.replace("<!-- the rule table -->", "\n".join(rows))
