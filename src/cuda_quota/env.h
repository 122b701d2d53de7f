/* The contract between the device plugin's Allocate answer and the memory-quota
 * library loaded into the container (docs/design-memory-quotas.md §3-§4).
 * A C header: the library (C ABI outward) and src/sharing both include it. */
#ifndef TESSERA_CUDA_QUOTA_ENV_H
#define TESSERA_CUDA_QUOTA_ENV_H

/* TESSERA_DEVICE_MEMORY_LIMIT_<k>: device k's quota in decimal bytes; k counts
 * the container's devices in the order of NVIDIA_VISIBLE_DEVICES from 0. With
 * no such variable at all the library installs nothing. */
#define TESSERA_ENV_MEMORY_LIMIT_PREFIX "TESSERA_DEVICE_MEMORY_LIMIT_"
/* TESSERA_DEVICE_UUID_<k>: device k's GPU or MIG UUID ("GPU-…", "MIG-…"), as
 * cuDeviceGetUuid_v2 and nvmlDeviceGetUUID name it; how the library finds
 * which CUDA ordinal is device k. */
#define TESSERA_ENV_DEVICE_UUID_PREFIX "TESSERA_DEVICE_UUID_"
/* The directory holding the container's ledger file (`<dir>/ledger`),
 * shared read-write by every process of the container. */
#define TESSERA_ENV_LEDGER_DIR "TESSERA_LEDGER_DIR"
/* The container's key, recorded in the ledger at creation; a ledger with
 * another key is refused (a wrong mount). Optional: default below. */
#define TESSERA_ENV_LEDGER_KEY "TESSERA_LEDGER_KEY"
#define TESSERA_DEFAULT_LEDGER_KEY "container"
/* The library's log threshold: "error", "warn" (default), "info", "debug". */
#define TESSERA_ENV_CUDA_LOG "TESSERA_CUDA_LOG"

/* Where Allocate mounts things inside the container. */
#define TESSERA_CONTAINER_LIBRARY_DIR "/usr/local/tessera/lib"
#define TESSERA_LIBRARY_FILE "libtessera-cuda.so"
#define TESSERA_CONTAINER_LIBRARY_PATH TESSERA_CONTAINER_LIBRARY_DIR "/" TESSERA_LIBRARY_FILE
#define TESSERA_CONTAINER_LEDGER_DIR "/run/tessera/ledger"
/* ld.so's system-wide preload list inside the container, and the host file
 * Allocate mounts there (read-only), in the ledger root: it names the
 * library, so a pod that sets its own LD_PRELOAD still loads it. */
#define TESSERA_CONTAINER_PRELOAD_FILE "/etc/ld.so.preload"
#define TESSERA_PRELOAD_FILE_NAME "ld.so.preload"

#endif
