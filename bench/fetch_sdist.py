"""Download a release's sdist from the package index's simple page, without building anything
(`pip download` prepares an sdist's metadata, which fails for some, e.g. a setup.py that needs
torch). Usage: fetch_sdist.py NAME VERSION DEST_FOLDER"""
import re
import sys
import urllib.request
from pathlib import Path

INDEX = "https://pypi.org/simple/"


def main(name: str, version: str, dest: Path) -> int:
    page = urllib.request.urlopen(f"{INDEX}{name}/", timeout=60).read().decode()
    spellings = {re.sub(r"[-_.]+", "-", name).lower()}
    for url, filename in re.findall(r'href="([^"#]+)[^"]*"[^>]*>([^<]+)</a>', page):
        stem = filename[: -len(f"-{version}.tar.gz")] if filename.endswith(f"-{version}.tar.gz") else None
        if stem is not None and re.sub(r"[-_.]+", "-", stem).lower() in spellings:
            dest.mkdir(parents=True, exist_ok=True)
            partial = dest / (filename + ".part")
            partial.write_bytes(urllib.request.urlopen(url, timeout=300).read())
            partial.rename(dest / filename)  # never a half-written archive under its own name
            return 0
    print(f"no sdist {name}=={version} on {INDEX}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
