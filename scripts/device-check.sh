#!/usr/bin/env bash
# Read-only check of tessera's NVML layer on a machine with a real NVIDIA GPU.
#
#   OUT=/some/dir scripts/device-check.sh
#
# What it does, and nothing else:
#   1. builds `tessera` and `nvml_latency` (release preset), unless both exist
#      already (TESSERA_BIN / NVML_LATENCY_BIN point at prebuilt ones);
#   2. runs `tessera inventory --json --profiles` and compares GPUs, UUIDs, PCI
#      bus ids, memory, MIG mode and MIG devices with `nvidia-smi -q -x`,
#      `nvidia-smi -L` and pynvml (when python3 has it);
#   3. compares every GPU-instance profile the driver reports (index, id,
#      slices, instance count, SMs, memory, engines, possible placements) with
#      tessera's catalog (`tessera catalog --gpu MODEL --json`);
#   4. times NVML calls (p50/p99 over 10,000 calls each) and one `nvidia-smi`;
#   5. writes $OUT/device-check.json and a short table $OUT/device-check.txt;
#   6. runs `tessera mig plan` (never apply) for a few of NVIDIA's configs
#      against the GPUs' current MIG state, into $OUT/mig-plan-*.json;
#   7. runs scripts/device-check-quota.sh: the memory-quota library under the
#      real CUDA runtime (a few GiB allocated and freed), into $OUT/quota*.txt.
#
# TESSERA_NVML_LIBRARY=PATH makes tessera and nvml_latency load another NVML
# (with the simulator's and TESSERA_SIM=DIR the script can be tried
# without a GPU; the nvidia-smi and pynvml comparisons are then skipped).
#
# It only ever reads: it never changes MIG mode, compute mode, clocks,
# persistence mode or application clocks, never creates or destroys MIG
# instances and never resets a GPU. Every NVML call it makes is a query.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-$PWD/build/device-check}
CALLS=${CALLS:-10000}
mkdir -p "$OUT"
log() { printf '==> %s\n' "$*" >&2; }
now_ns() { date +%s%N; }

# --- 1. build ---------------------------------------------------------------
TESSERA_BIN=${TESSERA_BIN:-build/release/src/tessera}
NVML_LATENCY_BIN=${NVML_LATENCY_BIN:-build/release/bench/nvml_latency}
if [[ ! -x $TESSERA_BIN || ! -x $NVML_LATENCY_BIN ]]; then
  log "building tessera and nvml_latency (log: $OUT/build.log)"
  {
    [[ -f build/release/build.ninja ]] || cmake --preset release
    cmake --build build/release -j "$(nproc)" --target tessera nvml_latency
  } >"$OUT/build.log" 2>&1 || { log "build failed; see $OUT/build.log"; tail -20 "$OUT/build.log" >&2; exit 1; }
fi

# --- 2. what each tool reports ------------------------------------------------
log "tessera inventory"
"$TESSERA_BIN" inventory --json --profiles >"$OUT/tessera-inventory.json" 2>"$OUT/tessera-inventory.err"
echo $? >"$OUT/tessera-inventory.rc"

log "nvidia-smi (timed)"
smi_ms=null
if command -v nvidia-smi >/dev/null; then
  t0=$(now_ns)
  nvidia-smi -q -x >"$OUT/nvidia-smi.xml" 2>"$OUT/nvidia-smi.err"
  t1=$(now_ns)
  smi_ms=$(( (t1 - t0) / 1000000 ))
  nvidia-smi -L >"$OUT/nvidia-smi-L.txt" 2>>"$OUT/nvidia-smi.err" || true
fi
echo "$smi_ms" >"$OUT/nvidia-smi.ms"

log "pynvml (if installed)"
python3 - >"$OUT/pynvml.json" 2>"$OUT/pynvml.err" <<'PY' || echo '{"available": false}' >"$OUT/pynvml.json"
import json
try:
    import pynvml as n
except Exception as e:  # not installed: nothing to compare with
    print(json.dumps({"available": False, "why": str(e)}))
    raise SystemExit(0)
def s(x):
    return x.decode() if isinstance(x, bytes) else x
n.nvmlInit()
out = {"available": True, "driver_version": s(n.nvmlSystemGetDriverVersion()), "gpus": []}
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    g = {"index": i, "name": s(n.nvmlDeviceGetName(h)), "uuid": s(n.nvmlDeviceGetUUID(h)),
         "pci_bus_id": s(n.nvmlDeviceGetPciInfo(h).busId)}
    try:  # a MIG-mode GPU's aggregate memory needs privileges
        g["memory_total"] = n.nvmlDeviceGetMemoryInfo(h).total
    except n.NVMLError as e:
        g["memory_error"] = str(e)
    try:
        cur, pend = n.nvmlDeviceGetMigMode(h)
        g["mig"] = {"current": bool(cur), "pending": bool(pend)}
        migs = []
        if cur:
            for k in range(n.nvmlDeviceGetMaxMigDeviceCount(h)):
                try:
                    m = n.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
                except n.NVMLError:
                    continue
                migs.append({"uuid": s(n.nvmlDeviceGetUUID(m)), "memory_total": n.nvmlDeviceGetMemoryInfo(m).total})
        g["mig_devices"] = migs
    except n.NVMLError as e:
        g["mig_error"] = str(e)
    out["gpus"].append(g)
n.nvmlShutdown()
print(json.dumps(out))
PY

log "catalog entries"
python3 - "$OUT/tessera-inventory.json" >"$OUT/models.txt" 2>/dev/null <<'PY' || true
import json, sys
try:
    inv = json.load(open(sys.argv[1]))
except Exception:
    raise SystemExit(0)
for m in sorted({g.get("model", "") for g in inv.get("gpus", []) if g.get("model")}):
    print(m)
PY
while read -r model; do
  [[ -n $model ]] && "$TESSERA_BIN" catalog --gpu "$model" --json >"$OUT/catalog-$model.json" 2>/dev/null
done <"$OUT/models.txt"

# --- 4. latency ----------------------------------------------------------------
log "NVML call latency ($CALLS calls each)"
"$NVML_LATENCY_BIN" --calls "$CALLS" ${TESSERA_NVML_LIBRARY:+--library "$TESSERA_NVML_LIBRARY"} >"$OUT/nvml-latency.json" 2>"$OUT/nvml-latency.err" ||
  echo '{"results": [], "error": "nvml_latency failed"}' >"$OUT/nvml-latency.json"

# --- 6. MIG plan, read-only ----------------------------------------------------
# `tessera mig plan` reads the GPUs' MIG state and prints what `mig apply`
# would do; it never changes anything (apply is not run here).
MIG_CONFIG=${MIG_CONFIG:-third_party/nvidia-mig-parted/config-default.yaml}
for config in all-disabled all-enabled all-balanced; do
  log "mig plan -c $config (read-only)"
  "$TESSERA_BIN" mig plan -f "$MIG_CONFIG" -c "$config" --json >"$OUT/mig-plan-$config.json" 2>"$OUT/mig-plan-$config.err" || true
done

# --- 3 and 5. compare and report ----------------------------------------------
log "comparing"
python3 - "$OUT" <<'PY'
import glob, json, os, re, sys
import xml.etree.ElementTree as ET

out = sys.argv[1]
def load(name, default=None):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except Exception:
        return default

checks = []  # {"what", "gpu", "tessera", "other", "source", "ok"}
def check(what, gpu, ours, theirs, source, ok=None):
    if ok is None:
        ok = ours == theirs
    checks.append({"what": what, "gpu": gpu, "tessera": ours, "other": theirs, "source": source, "ok": bool(ok)})

inv = load("tessera-inventory.json", {}) or {}
rc = open(os.path.join(out, "tessera-inventory.rc")).read().strip()
gpus = inv.get("gpus", [])

# nvidia-smi -q -x
smi = []
try:
    root = ET.parse(os.path.join(out, "nvidia-smi.xml")).getroot()
    for g in root.findall("gpu"):
        mib = lambda t: int(re.sub(r"[^0-9]", "", t or "0") or 0)
        smi.append({
            "name": g.findtext("product_name"),
            "uuid": g.findtext("uuid"),
            "pci_bus_id": g.get("id"),
            "memory_total_mib": mib(g.findtext("fb_memory_usage/total")),
            "mig_current": g.findtext("mig_mode/current_mig"),
            "mig_pending": g.findtext("mig_mode/pending_mig"),
        })
except Exception as e:
    smi_error = str(e)
smi_mig_uuids = set()
try:
    smi_mig_uuids = set(re.findall(r"\(UUID: (MIG-[^)]+)\)", open(os.path.join(out, "nvidia-smi-L.txt")).read()))
except Exception:
    pass

def memory_known(g):  # tessera notes what it could not read (no privileges)
    return not any("MemoryInfo" in n for n in g.get("notes", []))

def norm_bus(b):  # nvidia-smi may print 00000000:07:00.0 in either case
    return (b or "").upper()

if smi:
    check("GPU count", "-", len(gpus), len(smi), "nvidia-smi")
for i, g in enumerate(gpus):
    if i < len(smi):
        s = smi[i]
        check("name", i, g["name"], s["name"], "nvidia-smi")
        check("UUID", i, g["uuid"], s["uuid"], "nvidia-smi")
        check("PCI bus id", i, norm_bus(g["pci_bus_id"]), norm_bus(s["pci_bus_id"]), "nvidia-smi")
        if memory_known(g):
            check("memory total MiB", i, g["memory"]["total_bytes"] // (1 << 20), s["memory_total_mib"], "nvidia-smi")
        if s["mig_current"] not in (None, "N/A"):
            check("MIG current", i, g["mig"]["current"], s["mig_current"] == "Enabled", "nvidia-smi")
            check("MIG pending", i, g["mig"]["pending"], s["mig_pending"] == "Enabled", "nvidia-smi")
ours_migs = {m["uuid"] for g in gpus for m in g.get("mig_devices", [])}
if smi:
    check("MIG device UUIDs", "-", sorted(ours_migs), sorted(smi_mig_uuids), "nvidia-smi -L")

py = load("pynvml.json", {}) or {}
if py.get("available"):
    check("driver version", "-", inv.get("driver_version"), py.get("driver_version"), "pynvml")
    for i, g in enumerate(gpus):
        if i >= len(py["gpus"]):
            continue
        p = py["gpus"][i]
        check("UUID", i, g["uuid"], p["uuid"], "pynvml")
        check("PCI bus id", i, norm_bus(g["pci_bus_id"]), norm_bus(p["pci_bus_id"]), "pynvml")
        # Ours prefers nvmlDeviceGetMemoryInfo_v2; its total equals v1's.
        if memory_known(g) and "memory_total" in p:
            check("memory total bytes", i, g["memory"]["total_bytes"], p["memory_total"], "pynvml")
        if "mig" in p:
            check("MIG mode", i, g["mig"], p["mig"], "pynvml")
            check("MIG devices", i, sorted((m["uuid"], m["memory"]["total_bytes"]) for m in g.get("mig_devices", [])),
                  sorted((m["uuid"], m["memory_total"]) for m in p.get("mig_devices", [])), "pynvml")

# Driver profiles against the catalog.
for i, g in enumerate(gpus):
    cat = load(f"catalog-{g.get('model', '')}.json")
    profiles = g.get("profiles")
    if not cat or not isinstance(profiles, list):
        if isinstance(profiles, dict):
            check("profiles readable", i, profiles.get("error"), None, "driver", ok=False)
        continue
    by_index = {p["nvml_index"]: p for p in cat["profiles"]}
    if not profiles and not g["mig"]["current"]:
        # Some drivers report no profiles while MIG is disabled; nothing to compare.
        check("profiles reported (MIG disabled)", i, 0, len(by_index), "catalog", ok=True)
        continue
    check("profile indices", i, sorted(p["index"] for p in profiles), sorted(by_index), "catalog")
    for p in profiles:
        c = by_index.get(p["index"])
        if not c:
            continue
        tag = f"{c['name']} (index {p['index']})"
        check(f"{tag} id", i, p["id"], c["profile_id"], "catalog")
        check(f"{tag} slices", i, p["slices"], c["slices"], "catalog")
        check(f"{tag} instance count", i, p["instance_count"], c["max_count"], "catalog")
        if not c.get("sm_estimated"):
            check(f"{tag} SMs", i, p["multiprocessors"], c["sm_count"], "catalog")
        # Memory per profile drifts between driver versions (catalog note); reported, not fatal.
        check(f"{tag} memory MiB", i, p["memory_mib"], c["memory_mib"], "catalog", ok=True if c.get("memory_estimated") else None)
        check(f"{tag} engines", i, p["engines"], c["engines"], "catalog")
        if "placements" in p:
            check(f"{tag} placements", i, p["placements"], c["placements"], "catalog")
        else:
            check(f"{tag} placements", i, p.get("placements_error"), c["placements"], "catalog", ok=False)

lat = load("nvml-latency.json", {}) or {}
smi_ms = open(os.path.join(out, "nvidia-smi.ms")).read().strip()
report = {
    "tessera_inventory_rc": int(rc) if rc.isdigit() else rc,
    "tessera_inventory_error": open(os.path.join(out, "tessera-inventory.err")).read().strip(),
    "driver_version": inv.get("driver_version"),
    "cuda_version": inv.get("cuda_version"),
    "gpus": [{k: g.get(k) for k in ("index", "name", "model", "uuid", "pci_bus_id", "mig", "notes")} for g in gpus],
    "pynvml_available": bool(py.get("available")),
    "checks": checks,
    "failed": [c for c in checks if not c["ok"]],
    "latency": lat.get("results", []),
    "nvidia_smi_ms": None if smi_ms == "null" else int(smi_ms),
}
with open(os.path.join(out, "device-check.json"), "w") as f:
    json.dump(report, f, indent=2)

lines = []
lines.append(f"driver {report['driver_version']}, CUDA {report['cuda_version']}, {len(gpus)} GPUs, "
             f"tessera inventory exit {report['tessera_inventory_rc']}")
lines.append(f"checks: {len(checks) - len(report['failed'])} ok, {len(report['failed'])} differ")
for c in report["failed"]:
    lines.append(f"  DIFF gpu {c['gpu']} {c['what']} ({c['source']}): tessera={c['tessera']!r} other={c['other']!r}")
lines.append("")
lines.append(f"{'CALL':48} {'P50 us':>9} {'P99 us':>9} {'ERRORS':>7}")
for r in report["latency"]:
    lines.append(f"{r['call']:48} {r['p50_ns'] / 1000:9.2f} {r['p99_ns'] / 1000:9.2f} {r['errors']:7}")
if report["nvidia_smi_ms"] is not None:
    lines.append(f"{'one nvidia-smi -q -x':48} {report['nvidia_smi_ms'] * 1000:9.0f}")
text = "\n".join(lines) + "\n"
with open(os.path.join(out, "device-check.txt"), "w") as f:
    f.write(text)
print(text, end="")
PY

# --- 7. the memory-quota library ------------------------------------------------
log "memory-quota library (scripts/device-check-quota.sh)"
OUT="$OUT" scripts/device-check-quota.sh || log "the quota check failed; see $OUT/quota*.txt"
