#!/usr/bin/env bash
# Fetch script-heavy PyTorch code (training and inference scripts, recipes, examples, tutorial
# code) to measure rules on code written to be run rather than imported. Pinned releases from
# the package registry: the sdist where it ships the scripts, else the wheel; only .py and
# .ipynb files are kept. Usage: fetch_scripts.sh [DEST]   (default: ~/.cache/devlint-scripts)
# Prints the path of the unpacked tree (DEST/src) as its last line.
set -euo pipefail
dest=${1:-${HOME}/.cache/devlint-scripts}
mkdir -p "$dest/archives" "$dest/src"

# name==version  kind  what the scripts are
packages="
pytorch-ignite==0.5.5  sdist  examples/: MNIST, CIFAR-10, GANs, RL, segmentation, notebooks
litgpt==0.5.13         sdist  litgpt/{finetune,generate,chat,scripts}/, pretrain.py
open-clip-torch==3.3.0 sdist  src/open_clip_train/: the CLIP training entry point
trl==1.16.0            sdist  trl/scripts/: sft, dpo, grpo, reward training scripts
torchtune==0.6.1       wheel  recipes/: fine-tuning and generation recipes (no sdist published)
d2l==1.0.3             sdist  d2l/torch.py: the Dive into Deep Learning book's code
"

while read -r spec kind _; do
  [ -z "$spec" ] && continue
  name=${spec%%==*}; ver=${spec##*==}
  norm=$(echo "$name" | tr 'A-Z-' 'a-z_')
  if [ "$kind" = wheel ]; then
    pattern="$dest/archives/${norm}-${ver}-*.whl"
    flags=(--only-binary=:all:)
  else
    pattern="$dest/archives/${norm}-${ver}.tar.gz"
    flags=(--no-binary=:all:)
  fi
  # shellcheck disable=SC2086
  if ! ls $pattern >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps "${flags[@]}" -d "$dest/archives" "$spec" >&2
  fi
  # shellcheck disable=SC2086
  archive=$(ls $pattern | head -n 1)
  out="$dest/src/${norm}-${ver}"
  if [ ! -d "$out" ]; then
    rm -rf "$out.tmp" && mkdir -p "$out.tmp"
    if [ "$kind" = wheel ]; then
      (cd "$out.tmp" && python3 -m zipfile -e "$archive" . >/dev/null)
    else
      tar -xzf "$archive" -C "$out.tmp" --strip-components=1
    fi
    find "$out.tmp" -type f ! -name '*.py' ! -name '*.ipynb' -delete
    find "$out.tmp" -depth -type d -empty -delete
    mv "$out.tmp" "$out"
  fi
done <<< "$packages"
echo "$dest/src"
