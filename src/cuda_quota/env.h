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
/* Without a limits file: the directory holding the container's ledger file
 * (`<dir>/ledger`), shared read-write by every process of the container. */
#define TESSERA_ENV_LEDGER_DIR "TESSERA_LEDGER_DIR"
/* Without a limits file: the container's key, recorded in the ledger at
 * creation; a ledger with another key is refused (a wrong mount). Optional:
 * default below. */
#define TESSERA_ENV_LEDGER_KEY "TESSERA_LEDGER_KEY"
#define TESSERA_DEFAULT_LEDGER_KEY "container"
/* The library's log threshold: "error", "warn" (default), "info", "debug". */
#define TESSERA_ENV_CUDA_LOG "TESSERA_CUDA_LOG"

/* The limits file: the node's decision, written by the device plugin at
 * Allocate (before any process of the container exists) and mounted read-only
 * at TESSERA_CONTAINER_LIMITS_FILE. Wherever that path exists the library takes
 * the quotas, the device UUIDs and the ledger key from it alone, and its ledger
 * from TESSERA_CONTAINER_LEDGER_FILE; the TESSERA_DEVICE_* and TESSERA_LEDGER_*
 * variables are then ignored.
 * The environment is read only where no limits file exists (and the library
 * says so in a warning). Text, at most TESSERA_LIMITS_MAX_BYTES bytes, every
 * line ending in '\n', fields separated by one space:
 *   tessera-limits 1                         first line, exactly
 *   key <ledger key>                         once: 1-127 of [A-Za-z0-9._-]
 *   <k> <uuid> <bytes>[ context=<bytes>]     one per device, k = 0, 1, ... in order
 *   # ...                                    comments
 * <uuid> is "GPU-" or "MIG-" and 32 hex digits (dashes anywhere after the
 * prefix), <bytes> plain decimal; `context=` is what a process's first context
 * on that device is charged when no context exists to measure it with. A file
 * that is missing where TESSERA_ENV_LIMITS_FILE announces one, unreadable, not
 * on a read-only mount, malformed, or above a device's memory makes the
 * library refuse to create a CUDA context (CUDA_ERROR_NOT_PERMITTED, and a
 * line on stderr saying why), never run unlimited. */
#define TESSERA_CONTAINER_LIMITS_FILE "/run/tessera/limits"
#define TESSERA_LIMITS_MAX_BYTES 4096
/* Set by Allocate to TESSERA_CONTAINER_LIMITS_FILE: the container has a limits
 * file, so its absence is an error, not a reason to read the environment.
 * Only announces: the library never reads a file this variable names. */
#define TESSERA_ENV_LIMITS_FILE "TESSERA_LIMITS_FILE"
/* On the host: <ledger root>/<key>/limits and <ledger root>/<key>/ledger, each
 * mounted into the container as a single file (the directory never is). */
#define TESSERA_LIMITS_FILE_NAME "limits"
#define TESSERA_LEDGER_FILE_NAME "ledger"

/* Where Allocate mounts things inside the container. */
#define TESSERA_CONTAINER_LIBRARY_DIR "/usr/local/tessera/lib"
#define TESSERA_LIBRARY_FILE "libtessera-cuda.so"
#define TESSERA_CONTAINER_LIBRARY_PATH TESSERA_CONTAINER_LIBRARY_DIR "/" TESSERA_LIBRARY_FILE
#define TESSERA_CONTAINER_LEDGER_DIR "/run/tessera/ledger"
#define TESSERA_CONTAINER_LEDGER_FILE TESSERA_CONTAINER_LEDGER_DIR "/" TESSERA_LEDGER_FILE_NAME
/* ld.so's system-wide preload list inside the container, and the host file
 * Allocate mounts there (read-only), in the ledger root: it names the
 * library, so a pod that sets its own LD_PRELOAD still loads it. */
#define TESSERA_CONTAINER_PRELOAD_FILE "/etc/ld.so.preload"
#define TESSERA_PRELOAD_FILE_NAME "ld.so.preload"

#endif
