#!/usr/bin/env bash
# Fails when any file of the project refers to a path outside its own tree:
# a sibling reference folder, a machine's home or work directory, or a CMake
# path that climbs above the source root. A clone with nothing beside it must
# build, demo, benchmark and test. Files under third_party/ are kept verbatim
# and are not checked. Run by ctest (and so by ./x test).
#
#   scripts/check-self-contained.sh [ROOT]    (default: this script's tree)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# Patterns, each with why it is outside the tree.
patterns=(
  '\.\./shared\b'                     # a folder beside the clone
  '\bshared/(data|refs)\b'            # the same, named without ../
  '\b(DESIGN|STYLE)\.md\b'            # design notes that live outside (ours: docs/architecture.md)
  '(^|[^A-Za-z0-9_.])/(work|home|root)/'  # a machine's own directories
  '\$\{(CMAKE|PROJECT)_(SOURCE|BINARY)_DIR\}/\.\.'  # CMake climbing above the tree
)

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard)
else
  mapfile -t files < <(find . -type f -not -path './build/*' -not -path './.git/*' | sed 's|^\./||')
fi

self=scripts/check-self-contained.sh
status=0
checked=0
for f in "${files[@]}"; do
  [[ $f == third_party/* || $f == "$self" || ! -f $f ]] && continue
  checked=$((checked + 1))
  for p in "${patterns[@]}"; do
    if hits=$(grep -nIE -- "$p" "$f"); then
      while IFS= read -r hit; do
        echo "$f:${hit%%:*}: refers outside the tree (/${p}/): ${hit#*:}" >&2
      done <<<"$hits"
      status=1
    fi
  done
done
if ((status == 0)); then
  echo "self-contained: $checked files refer to nothing outside the tree"
fi
exit "$status"
