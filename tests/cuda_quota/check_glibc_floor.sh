#!/usr/bin/env bash
# The hooks run on the host, under the host's glibc (runc, crun and containerd run CDI hooks
# there), so each built hook needs no glibc newer than the floor (2.28: EL8, Debian 10), and
# nothing but glibc: a static binary passes as it is; a dynamic one may name no symbol version
# (in its symbols or its version needs) above the floor, and needs only glibc's libraries. Each
# hook must also still run here (--help).
#   check_glibc_floor.sh FLOOR HOOK...
set -euo pipefail
floor=$1
shift
fail() { echo "check_glibc_floor: $*" >&2; exit 1; }
(($#)) || fail "no hook given"
for hook in "$@"; do
  [[ -x $hook ]] || fail "$hook is not an executable"
  name=$(basename "$hook")
  "$hook" --help >/dev/null || fail "$name --help failed on this host"
  if ! readelf -l -W "$hook" | grep -q ' INTERP '; then
    readelf -d "$hook" | grep -q '(NEEDED)' && fail "$name has no interpreter yet needs shared libraries"
    echo "$name: static, needs no C library of the host"
    continue
  fi
  while read -r n; do
    case $n in
      libc.so.6|libdl.so.2|libpthread.so.0|libm.so.6|ld-linux-*.so.*) ;;
      *) fail "$name needs $n at run time; only glibc is allowed" ;;
    esac
  done < <(readelf -d "$hook" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  # Every version the binary names: its symbols' (objdump -T) and its version needs (readelf -V).
  versions=$( { objdump -T "$hook"; readelf -V -W "$hook"; } | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV)
  [[ -n $versions ]] || fail "$name names no glibc version at all; is it glibc's?"
  newest=$(tail -1 <<<"$versions")
  if [[ $(printf '%s\n%s\n' "$floor" "$newest" | sort -V | tail -1) != "$floor" ]]; then
    above=$(objdump -T "$hook" | awk -v f="$floor" '{for (i = 1; i <= NF; ++i) if ($i ~ /GLIBC_[0-9]/) {v = $i; gsub(/[()]/, "", v); sub(/GLIBC_/, "", v); print v, $NF}}' |
      while read -r v s; do [[ $(printf "%s\n%s\n" "$floor" "$v" | sort -V | tail -1) == "$floor" ]] || echo "$s@GLIBC_$v"; done | sort -u | tr '\n' ' ')
    fail "$name needs glibc $newest, above the floor $floor (symbols: ${above:-none; see readelf -V})"
  fi
  echo "$name: dynamic, newest glibc version named $newest (floor $floor)"
done
