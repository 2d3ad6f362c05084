#!/usr/bin/env bash
# Fetch the held-out corpus (bench/heldout/packages.txt): each pinned sdist from the package
# registry, unpacked with only its .py and .ipynb files into DEST/<half>/<name>-<version>.
# Usage: fetch_heldout.sh [DEST]   (default: ~/.cache/devlint-heldout)
# Prints DEST as its last line; DEST/tuning and DEST/held-out are the two halves, DEST/fresh,
# DEST/third to DEST/thirtyeighth the second to thirty-eighth held-out sets.
set -euo pipefail
dest=${1:-${HOME}/.cache/devlint-heldout}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dest/archives"

while read -r spec half; do
  case "$spec" in ''|\#*) continue ;; esac
  name=${spec%%==*}; ver=${spec##*==}
  out="$dest/$half/$name-$ver"
  mkdir -p "$dest/$half"
  [ -d "$out" ] && continue
  # sdists name their archive with either spelling of the project name
  find_archive() { ls "$dest/archives/"*"-$ver.tar.gz" 2>/dev/null | while read -r a; do
    base=$(basename "$a" "-$ver.tar.gz"); [ "$(echo "$base" | tr 'A-Z_.' 'a-z--')" = "$name" ] && echo "$a" && break; done; true; }
  archive=$(find_archive)
  if [ -z "$archive" ]; then
    # the archive as published, built by nothing (pip prepares metadata: for some sdists that
    # fails, or compiles their build requirements for many minutes); pip where that fails
    python3 "$here/fetch_sdist.py" "$name" "$ver" "$dest/archives" \
      || python3 -m pip download -q --no-deps --no-binary=:all: -d "$dest/archives" "$spec" >&2
    archive=$(find_archive)
  fi
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  tar -xzf "$archive" -C "$out.tmp" --strip-components=1
  find "$out.tmp" -type f ! -name '*.py' ! -name '*.ipynb' -delete
  find "$out.tmp" -depth -type d -empty -delete
  mv "$out.tmp" "$out"
done < "$here/heldout/packages.txt"
echo "$dest"
