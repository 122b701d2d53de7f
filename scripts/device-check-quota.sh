#!/usr/bin/env bash
# The memory-quota library on a real GPU (docs/design-memory-quotas.md §5,
# "Real GPU"). Read-only: it never changes MIG mode, compute mode, clocks or
# any other setting; it allocates a few GiB at most and frees them.
#
#   OUT=/some/dir scripts/device-check-quota.sh
#
#   1. builds libtessera-cuda.so and tessera_cuda_client (release preset) and
#      a CUDA-runtime program (scripts/device/quota_probe.cu) with nvcc;
#   2. rule 5 of §1: for every wrapped row, the driver's cuGetProcAddress answer
#      is its exported function of that exact name (tessera_cuda_client, no library);
#   3. without the library: memory info and the cost of cudaMalloc+cudaFree;
#   4. with a quota of QUOTA_GIB (default 4) on GPU 0: cudaMemGetInfo reports the
#      quota, cudaMalloc and cudaMallocAsync stop at it with
#      cudaErrorMemoryAllocation (2), which entry point cudaGetDriverEntryPoint
#      gives, two processes add up, the cost per pair, and PyTorch's
#      mem_get_info and an allocation past the quota if python3 has torch;
#   5. writes everything to $OUT/quota-*.txt and a summary $OUT/quota.txt.
# Without a GPU (or without nvcc) it says so and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build/device-check}
QUOTA_GIB=${QUOTA_GIB:-4}
mkdir -p "$OUT"
log() { printf '==> %s\n' "$*" >&2; }
summary=$OUT/quota.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

command -v nvcc >/dev/null || { say "quota: no nvcc; skipped"; exit 0; }
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { say "quota: no GPU; skipped"; exit 0; }

log "building the quota library, the client and the probe (log: $OUT/quota-build.log)"
# Each step must succeed: a group's status is its last command's, and a probe built after a failed
# library build would measure the driver without the library.
{
  { [[ -f build/release/build.ninja ]] || cmake --preset release; } &&
    cmake --build build/release -j "$(nproc)" --target tessera_cuda tessera_cuda_client &&
    nvcc -O2 -o "$OUT/quota_probe" scripts/device/quota_probe.cu -ldl
} >"$OUT/quota-build.log" 2>&1 || { say "quota: build failed (see quota-build.log)"; exit 1; }
lib=$PWD/build/release/src/cuda_quota/libtessera-cuda.so
client=build/release/tests/cuda_quota/tessera_cuda_client
probe=$OUT/quota_probe

# --- 2. rule 5: the driver's answers are its exported functions ---------------
log "rule 5 against the real driver"
steps=()
while read -r name base version ptsz; do
  steps+=("pointer:$base:$version:$([[ $ptsz == true ]] && echo 2 || echo 0)")
done < <(sed -n 's/^ *X(\(cu[A-Za-z0-9_]*\), "\([A-Za-z0-9_]*\)", \([0-9]*\), \(true\|false\)).*/\1 \2 \3 \4/p' src/cuda_quota/entry_points.hpp)
"$client" "${steps[@]}" >"$OUT/quota-rule5.txt" 2>&1
mismatch=0
while read -r name base version ptsz; do
  flag=$([[ $ptsz == true ]] && echo 2 || echo 0)
  got=$(awk -v s="pointer:$base:$version:$flag" '$1 == s {print $4}' "$OUT/quota-rule5.txt")
  [[ $got == "$name" ]] || { mismatch=$((mismatch + 1)); echo "  $base@$version/$flag: driver gives '$got', row says $name" >>"$summary"; }
done < <(sed -n 's/^ *X(\(cu[A-Za-z0-9_]*\), "\([A-Za-z0-9_]*\)", \([0-9]*\), \(true\|false\)).*/\1 \2 \3 \4/p' src/cuda_quota/entry_points.hpp)
say "rule 5: ${#steps[@]} rows, $mismatch where the driver's function is not the exported one of that name"

uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
quota=$((QUOTA_GIB << 30))
ledger=$(mktemp -d "${TMPDIR:-/tmp}/tessera-quota-ledger-XXXXXX")
chmod 1777 "$ledger"
limited=(env LD_PRELOAD="$lib" TESSERA_DEVICE_MEMORY_LIMIT_0=$quota TESSERA_DEVICE_UUID_0="$uuid"
         TESSERA_LEDGER_DIR="$ledger" CUDA_VISIBLE_DEVICES="$uuid")
plain=(env CUDA_VISIBLE_DEVICES="$uuid")

# --- 3. without the library ----------------------------------------------------
say "without the library: $("${plain[@]}" "$probe" info) ; $("${plain[@]}" "$probe" cost) ns per pair"
# --- 4. with it -------------------------------------------------------------------
say "with a ${QUOTA_GIB} GiB quota: $("${limited[@]}" "$probe" info 2>>"$OUT/quota-stderr.txt")"
say "  $("${limited[@]}" "$probe" fill $((256 << 20)) $((2 * quota)) 2>>"$OUT/quota-stderr.txt")  (chunks of 256 MiB; 2 = cudaErrorMemoryAllocation)"
say "  $("${limited[@]}" "$probe" async $((256 << 20)) $((2 * quota)) 2>>"$OUT/quota-stderr.txt")"
say "  $("${limited[@]}" "$probe" entry 2>>"$OUT/quota-stderr.txt")"
say "  $("${limited[@]}" "$probe" cost 2>>"$OUT/quota-stderr.txt") ns per pair"
"${limited[@]}" "$probe" hold $((quota / 2)) "$ledger/release" >"$OUT/quota-holder.txt" 2>>"$OUT/quota-stderr.txt" &
holder=$!
for _ in $(seq 100); do grep -q '^hold' "$OUT/quota-holder.txt" && break; sleep 0.1; done
say "  two processes: one holds half ($(cat "$OUT/quota-holder.txt")); the other sees $("${limited[@]}" "$probe" info 2>>"$OUT/quota-stderr.txt") and fills $("${limited[@]}" "$probe" fill $((256 << 20)) $((2 * quota)) 2>>"$OUT/quota-stderr.txt")"
touch "$ledger/release"
wait "$holder"
if python3 -c 'import torch' 2>/dev/null; then
  say "  PyTorch: $("${limited[@]}" python3 -c '
import torch
free, total = torch.cuda.mem_get_info()
try:
    x = torch.empty(int(total * 1.5), dtype=torch.uint8, device="cuda")
    past = "allocated past the quota"
except torch.cuda.OutOfMemoryError:
    past = "OutOfMemoryError past the quota"
print(f"mem_get_info free {free} total {total}; {past}")' 2>>"$OUT/quota-stderr.txt")"
else
  say "  PyTorch: not installed"
fi
say "  library log lines: $(grep -c 'tessera-cuda' "$OUT/quota-stderr.txt" || true) (first: $(grep -m1 'tessera-cuda' "$OUT/quota-stderr.txt"))"
rm -rf "$ledger"
