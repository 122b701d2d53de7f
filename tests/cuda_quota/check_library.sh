#!/usr/bin/env bash
# libtessera-cuda.so's shape (docs/design-memory-quotas.md §4, §6): it exports dlsym and
# exactly the rows of entry_points.hpp, and needs nothing but glibc at run time (no C++
# runtime: a container image may have none). Prints the newest glibc symbol version it binds.
#   check_library.sh LIBRARY ENTRY_POINTS_HPP
set -euo pipefail
lib=$1 rows=$2
fail() { echo "check_library: $*" >&2; exit 1; }

want=$( { echo dlsym; sed -n 's/^ *X(\([A-Za-z0-9_]*\),.*/\1/p' "$rows"; } | sort)
have=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ {print $3}' | sed 's/@.*//' | sort)
[[ $(wc -l <<<"$want") -gt 30 ]] || fail "read too few rows from $rows"
if [[ $want != "$have" ]]; then
  diff <(echo "$want") <(echo "$have") >&2 || true
  fail "exports differ from entry_points.hpp (< wanted, > exported)"
fi
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
while read -r n; do
  case $n in
    libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|ld-linux-*.so.*) ;;
    *) fail "needs $n at run time; only glibc is allowed" ;;
  esac
done <<<"$needed"
echo "exports: $(wc -l <<<"$have") symbols, as entry_points.hpp lists"
echo "needs: $(tr '\n' ' ' <<<"$needed")"
echo "newest glibc version bound: $(objdump -T "$lib" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)"
