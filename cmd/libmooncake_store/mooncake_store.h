/*
 * mooncake_store.h: the C API of libmooncake_store, mooncake-go's client library.
 *
 * Source compatible with Mooncake's store_c.h: the same function names, argument types and
 * return conventions (0 or a count on success, a negative MOONCAKE_ERR_* code on failure),
 * plus the calls Mooncake's Python API needs beyond it (marked "extension" below). It is a
 * thin skin over mooncake-go's Go client (package client) and, when setup is given a
 * global_segment_size > 0, an embedded worker. The layout of mooncake_replicate_config_t
 * adds one trailing field (persistence) to Mooncake's, so the library is source compatible,
 * not binary compatible, with programs built against Mooncake's header.
 *
 * Build (Go >= the version in go.mod, gcc; from the repository root):
 *
 *     go build -buildmode=c-shared -o DIR/libmooncake_store.so ./cmd/libmooncake_store
 *     (or: make libmooncake_store, which writes bin/libmooncake_store.so)
 *
 * and compile against this header alone:
 *
 *     gcc -I cmd/libmooncake_store prog.c -L DIR -lmooncake_store -Wl,-rpath,DIR
 *
 * # Conventions (every function)
 *
 * - Handles. A mooncake_store_t is an opaque integer handle (not a pointer) made by
 *   mooncake_store_create. A handle that was never created, or was destroyed, makes every
 *   call fail with MOONCAKE_ERR_INVALID_PARAMS: never a crash.
 * - Threads. Every function may be called from any number of threads at once, on one store
 *   or several; each call is a plain blocking C call (no global lock is held while it
 *   waits on the network, so Python's ctypes releases the GIL and threads overlap). Only
 *   mooncake_store_destroy must not race with other calls on the same store (calls that
 *   were already running finish or fail cleanly; the caller must not use the handle after).
 * - Strings. Every "const char *" argument is read during the call only; the caller may
 *   free it when the call returns (Mooncake's convention). Keys are 1 to 4096 bytes.
 * - Caller memory. Buffers passed in (void *buffer, size_t size) are read or written only
 *   during the call and only within [buffer, buffer + size). A get writes the object
 *   straight into the caller's buffer (no intermediate copy). A NULL buffer with a
 *   non-zero size, a NULL array, or a mismatched count is MOONCAKE_ERR_INVALID_PARAMS.
 *   The library cannot check that a non-NULL pointer is valid memory: passing freed or
 *   foreign memory is undefined behaviour, as in any C API.
 * - GPU memory. Where the process has loaded the CUDA driver, a caller buffer may be CUDA
 *   device memory of a context of this process: it is staged through host memory (one
 *   device-to-host copy before a put, one host-to-device copy after a get, done when the call
 *   returns). A range running past its device allocation is MOONCAKE_ERR_INVALID_PARAMS.
 *   Not yet run on a GPU (docs/clib.md, "GPU memory").
 * - Library memory. Memory the library returns (mooncake_store_get_buffer,
 *   mooncake_store_get_replica_desc, mooncake_store_batch_get_buffer) is malloc'd C
 *   memory the caller owns and releases with mooncake_store_free_buffer.
 * - Errors. Failures return a negative code from the list below and record a one-line
 *   description readable with mooncake_store_last_error() on the same thread (like errno:
 *   successful calls do not clear it). Batch calls return 0 once the call as a whole was
 *   accepted and write one result per item into results_out; they return a negative code
 *   (and write nothing) only when the arguments as a whole are bad.
 * - Semantics as Mooncake: a put of a key that already exists returns 0 and keeps the
 *   stored value (use the upsert calls to replace it); a get of a missing key returns
 *   MOONCAKE_ERR_OBJECT_NOT_FOUND; an empty value (size 0) is MOONCAKE_ERR_INVALID_PARAMS.
 */
#ifndef MOONCAKE_STORE_H
#define MOONCAKE_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: Mooncake's ErrorCode numbers. What each means here: */
#define MOONCAKE_OK 0
#define MOONCAKE_ERR_INTERNAL (-1)             /* a bug or an unexpected failure */
#define MOONCAKE_ERR_SEGMENT_NOT_FOUND (-101)  /* an unknown or dead worker */
#define MOONCAKE_ERR_NO_AVAILABLE_HANDLE (-200) /* no space: no worker with room, nothing evictable,
                                                   or more replicas asked than workers */
#define MOONCAKE_ERR_INVALID_VERSION (-300)    /* the object changed under the call */
#define MOONCAKE_ERR_INVALID_KEY (-400)        /* an empty key or one over 4096 bytes */
#define MOONCAKE_ERR_INVALID_PARAMS (-600)     /* bad arguments: NULL or unmapped pointers, a bad
                                                  handle, bad sizes, a buffer too small for the
                                                  object, a value over the size limit, a batch
                                                  over 4096 items, bad config values */
#define MOONCAKE_ERR_REPLICA_IS_NOT_READY (-703) /* the object is still being written */
#define MOONCAKE_ERR_OBJECT_NOT_FOUND (-704)   /* no such key */
#define MOONCAKE_ERR_OBJECT_ALREADY_EXISTS (-705) /* (not returned by put: see Conventions) */
#define MOONCAKE_ERR_TRANSFER_FAIL (-800)      /* moving bytes to or from a worker failed */
#define MOONCAKE_ERR_CHECKSUM_MISMATCH (-801)  /* every replica failed its checksum */
#define MOONCAKE_ERR_RPC_FAIL (-900)           /* no master reachable, or no leader */
#define MOONCAKE_ERR_RPC_TIMEOUT (-901)        /* the call's deadline passed */
#define MOONCAKE_ERR_UNAVAILABLE_IN_CURRENT_STATUS (-1010) /* the store is not set up, or
                                                             closed */
#define MOONCAKE_ERR_NOT_SUPPORTED (-1012)     /* a feature this build lacks (an etcd:// master
                                                  address; protocol "rdma" is served over tcp) */
#define MOONCAKE_ERR_TENANT_QUOTA_EXCEEDED (-1700) /* a put would take the store's tenant over
                                                     its quota (mooncake tenant quota) */
#define MOONCAKE_ERR_SESSION_NOT_FOUND (-1800) /* no KV session of that id */
#define MOONCAKE_ERR_SESSION_LIMIT_EXCEEDED (-1802) /* a KV-session limit would be passed */

/* An opaque handle (an integer, not a pointer to library memory). 0/NULL is never valid. */
typedef void *mooncake_store_t;

/* Soft-pin intent (mooncake_replicate_config_t.soft_pin_action), Mooncake's values. */
enum mooncake_soft_pin_action {
    MOONCAKE_SOFT_PIN_PRESERVE = 0, /* no new soft pin (an upsert does not carry the old one) */
    MOONCAKE_SOFT_PIN_ENABLE = 1,   /* soft pin for soft_pin_ttl_ms, or 30 minutes when
                                       has_soft_pin_ttl is 0 */
    MOONCAKE_SOFT_PIN_DISABLE = 2   /* no soft pin */
};

/* Persistence override (mooncake_replicate_config_t.persistence), mooncake-go's modes. */
enum mooncake_persistence {
    MOONCAKE_PERSISTENCE_DEFAULT = 0, /* the worker's mode */
    MOONCAKE_PERSISTENCE_CACHE = 1,   /* evicted from DRAM: dropped */
    MOONCAKE_PERSISTENCE_SPILL = 2,   /* evicted from DRAM: moved to NVMe */
    MOONCAKE_PERSISTENCE_DURABLE = 3  /* on NVMe before the put returns */
};

/*
 * How a put places and keeps an object. A NULL config pointer, or a zeroed struct, means one
 * replica, any worker, no pin, the worker's persistence. Read during the call only.
 * Any field out of range makes the put return MOONCAKE_ERR_INVALID_PARAMS.
 */
struct mooncake_replicate_config {
    size_t replica_num;        /* copies on distinct workers; 0 means 1; at most 255 */
    int with_hard_pin;         /* non-zero: never evicted until removed */
    /* Where the first replica goes if it has room: each entry a worker id or a worker
     * address ("host:port", as mooncake_store_get_hostname returns); the first entry
     * that names a live worker is used, the others are ignored. NULL entries are skipped.
     * An entry that names no live worker is ignored (placement falls back to any worker). */
    const char **preferred_segments;
    size_t preferred_segments_count;
    int soft_pin_action;       /* enum mooncake_soft_pin_action; anything else: INVALID_PARAMS */
    int has_soft_pin_ttl;      /* non-zero: soft_pin_ttl_ms is set; without
                                  MOONCAKE_SOFT_PIN_ENABLE that is INVALID_PARAMS (as Mooncake) */
    uint64_t soft_pin_ttl_ms;  /* with MOONCAKE_SOFT_PIN_ENABLE: the pin's length */
    int persistence;           /* extension: enum mooncake_persistence */
};
typedef struct mooncake_replicate_config mooncake_replicate_config_t;

/* The library's own Go code includes this header for the types only (cgo declares the
 * functions itself, without const); programs never define MOONCAKE_STORE_TYPES_ONLY. */
#ifndef MOONCAKE_STORE_TYPES_ONLY

/* ------------------------------------------------------------------------------------------
 * Lifecycle
 * ------------------------------------------------------------------------------------------ */

/* Makes a store handle (not yet connected: call mooncake_store_setup or _init_all).
 * Returns NULL only when the process is out of memory. Release with mooncake_store_destroy. */
mooncake_store_t mooncake_store_create(void);

/* Closes the store (as mooncake_store_close) and releases the handle, which must not be used
 * again. NULL or an unknown handle is ignored. */
void mooncake_store_destroy(mooncake_store_t store);

/* Mooncake's etcd TLS settings, to be called before mooncake_store_setup. Accepted and
 * ignored (any of the three may be NULL or ""): mooncake-go has no etcd, the masters' raft
 * holds the metadata. The strings are not kept. */
void mooncake_store_set_etcd_tls_config(mooncake_store_t store, const char *ca_file,
                                        const char *cert_file, const char *key_file);

/* Extension (Mooncake's setup option tenant_id): the tenant of the store's next setup. Every
 * key the store is given is then in that tenant's namespace: it never sees, lists or removes
 * another tenant's objects, and its puts count against the tenant's quota
 * (MOONCAKE_ERR_TENANT_QUOTA_EXCEEDED past it). NULL, "" or "default": the default tenant
 * (also what a store that never calls this is in). Tenant ids are 1 to 128 bytes of
 * [A-Za-z0-9._-]. Call it before mooncake_store_setup; on a store that is set up it is
 * MOONCAKE_ERR_INVALID_PARAMS (close it first). The string is not kept. Returns 0 or
 * MOONCAKE_ERR_INVALID_PARAMS. */
int mooncake_store_set_tenant_id(mooncake_store_t store, const char *tenant_id);

/*
 * Connects the store to the cluster. Mooncake's seven positional values:
 * - local_hostname: this host's name or address as other hosts reach it ("host" or
 *   "host:port"); the embedded worker listens on it (port 0 or none: a free port).
 *   NULL or "": "localhost".
 * - metadata_server: accepted and ignored, with one warning on stderr (the masters' raft
 *   replaces Mooncake's metadata server).
 * - global_segment_size: bytes of DRAM this process contributes to the cluster. > 0 runs a
 *   worker inside this process with an arena of that size: registered with the masters, it
 *   serves other clients, holds objects other clients put, and this process reads its own
 *   objects from it by a memory copy. mooncake_store_close and _destroy unmount it (as
 *   Mooncake's close does): when they return the leader places nothing more on it and the
 *   objects only it held are gone (a raft commit, bounded by 5 s). A process that exits
 *   without either (a crash, SIGKILL) is dropped by the leader at once for new puts and
 *   declared dead after the master's client_disconnect_grace (2 s); its objects go then.
 *   0: a pure client.
 * - local_buffer_size: accepted and unused (reads land in the caller's buffer directly).
 * - protocol: "tcp" (NULL or "": "tcp"); any other value (e.g. "rdma") is accepted with one
 *   warning and served over TCP (RDMA is not in this build).
 * - device_name: accepted and ignored, with one warning when non-empty.
 * - master_server_addr: "host:port" or a comma-separated list of masters. NULL or "": the
 *   MOONCAKE_MASTER environment variable, else master_server_address of the JSON file
 *   MOONCAKE_CONFIG_PATH names, else "127.0.0.1:50051" (as the mooncake CLI). An
 *   "etcd://" address is MOONCAKE_ERR_NOT_SUPPORTED.
 * Returns 0 once a master answered (and the embedded worker registered); a negative code
 * otherwise (MOONCAKE_ERR_RPC_FAIL: no master reachable). Setting up a store that is already
 * set up is MOONCAKE_ERR_INVALID_PARAMS: close it first.
 */
int mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
                         const char *metadata_server, uint64_t global_segment_size,
                         uint64_t local_buffer_size, const char *protocol,
                         const char *device_name, const char *master_server_addr);

/* Mooncake's init_all: setup("localhost", NULL, mount_segment_size, 0, protocol,
 * device_name, NULL), so the masters come from MOONCAKE_MASTER, the config file or the
 * default. Returns as mooncake_store_setup. */
int mooncake_store_init_all(mooncake_store_t store, const char *protocol,
                            const char *device_name, uint64_t mount_segment_size);

/* Extension (Python's close()): disconnects the store and unmounts its embedded worker (the
 * objects only it held are gone when this returns), keeping the handle so mooncake_store_setup
 * may be called again. Calls in flight fail. Closing a store that is not set up returns 0. */
int mooncake_store_close(mooncake_store_t store);

/* Returns 0 when a master answers, 1 when the store is not set up, 2 when no master
 * answered, MOONCAKE_ERR_INVALID_PARAMS for a bad handle. */
int mooncake_store_health_check(mooncake_store_t store);

/* ------------------------------------------------------------------------------------------
 * Put. Every put returns 0 once the object is committed (visible to every reader); on a
 * failure nothing becomes visible. A put of an existing key returns 0 and keeps the stored
 * value; an upsert replaces it. config may be NULL (see mooncake_replicate_config).
 * ------------------------------------------------------------------------------------------ */

/* Stores size bytes from value under key. value is read during the call only. */
int mooncake_store_put(mooncake_store_t store, const char *key, const void *value, size_t size,
                       const mooncake_replicate_config_t *config);

/* As mooncake_store_put (Mooncake's zero-copy form: the buffer need not be registered). */
int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
                            const mooncake_replicate_config_t *config);

/* Stores count objects (keys[i] from buffers[i], sizes[i] bytes), all with config; the
 * written ones commit together. results_out[i] (count entries, written by the library)
 * is 0 or item i's negative code. Returns 0, or a negative code (results_out untouched)
 * for NULL arrays or count over 4096. */
int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers,
                                  const size_t *sizes, size_t count,
                                  const mooncake_replicate_config_t *config, int *results_out);

/* Extension: stores one object made of count parts (parts[i], sizes[i] bytes, in order). */
int mooncake_store_put_parts(mooncake_store_t store, const char *key, const void *const *parts,
                             const size_t *sizes, size_t count,
                             const mooncake_replicate_config_t *config);

/* Extension: batch put where object i is made of part_counts[i] parts. buffers and sizes are
 * flattened: object 0's parts first, then object 1's... (sum of part_counts entries each).
 * results_out[i] as in mooncake_store_batch_put_from. */
int mooncake_store_batch_put_from_multi_buffers(mooncake_store_t store, const char **keys,
                                                size_t count, void *const *buffers,
                                                const size_t *sizes, const size_t *part_counts,
                                                const mooncake_replicate_config_t *config,
                                                int *results_out);

/* Extension: the upsert forms of put, put_from, batch_put_from and put_parts: insert, or
 * replace an existing object of the same key (readers see the old or the new value whole,
 * never a mix). Same arguments and returns as their put forms. */
int mooncake_store_upsert(mooncake_store_t store, const char *key, const void *value, size_t size,
                          const mooncake_replicate_config_t *config);
int mooncake_store_upsert_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
                               const mooncake_replicate_config_t *config);
int mooncake_store_batch_upsert_from(mooncake_store_t store, const char **keys, void **buffers,
                                     const size_t *sizes, size_t count,
                                     const mooncake_replicate_config_t *config, int *results_out);
int mooncake_store_upsert_parts(mooncake_store_t store, const char *key, const void *const *parts,
                                const size_t *sizes, size_t count,
                                const mooncake_replicate_config_t *config);

/* ------------------------------------------------------------------------------------------
 * Get
 * ------------------------------------------------------------------------------------------ */

/* Reads the object into buffer (size bytes of caller memory, written only during the call)
 * and returns its size (> 0), or a negative code: MOONCAKE_ERR_OBJECT_NOT_FOUND for a miss,
 * MOONCAKE_ERR_INVALID_PARAMS when size is smaller than the object (nothing meaningful is
 * in buffer then; mooncake_store_get_size tells the size). The bytes are checked against
 * the checksum committed with the object; a failed replica is replaced by the next. */
int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer, size_t size);

/* Reads count objects in parallel, keys[i] into buffers[i] (sizes[i] bytes).
 * results_out[i] (count entries) is the object's size or item i's negative code.
 * Returns 0, or a negative code (results_out untouched) for NULL arrays or count over 4096. */
int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers,
                                  const size_t *sizes, size_t count, int64_t *results_out);

/* Extension: batch get where object i is scattered over part_counts[i] caller buffers, in
 * order (flattened as in mooncake_store_batch_put_from_multi_buffers). results_out[i] is
 * the object's size, or a negative code (MOONCAKE_ERR_INVALID_PARAMS when the parts' total
 * is smaller than the object). */
int mooncake_store_batch_get_into_multi_buffers(mooncake_store_t store, const char **keys,
                                                size_t count, void *const *buffers,
                                                const size_t *sizes, const size_t *part_counts,
                                                int64_t *results_out);

/* Extension: ranged reads. Fragment i reads sizes[i] bytes at offset src_offsets[i] of object
 * keys[i] into dsts[i]. Every destination range [dsts[i], dsts[i] + sizes[i]) must lie inside
 * one buffer registered with mooncake_store_register_buffer (as Mooncake requires), else that
 * fragment is MOONCAKE_ERR_INVALID_PARAMS. results_out[i] is the bytes read (sizes[i]) or a
 * negative code (a range past the object's end: MOONCAKE_ERR_INVALID_PARAMS). Fragments
 * run in parallel; ranges are not checksummed (the checksum covers whole objects).
 * Returns 0, or a negative code (results_out untouched) for NULL arrays or count over 4096. */
int mooncake_store_get_into_ranges(mooncake_store_t store, size_t count, const char **keys,
                                   void *const *dsts, const uint64_t *src_offsets,
                                   const size_t *sizes, int64_t *results_out);

/* ------------------------------------------------------------------------------------------
 * Put and get sessions (extension: Mooncake's layer-wise ranged calls; docs/clib.md)
 *
 * A put session reserves objects, takes their byte ranges in any number of calls (one per
 * layer, as an engine produces them) and makes them visible at its end, each object whole
 * or not at all, all of one end in one commit. The ranges go straight to the workers'
 * memory; the library keeps no copy. Sessions belong to the store handle (not to a
 * thread); a session never ended is dropped by the cluster after the master's put timeout.
 * Ranged calls flatten ranges as the multi-buffer calls flatten parts: key i owns
 * range_counts[i] consecutive entries of buffers, sizes and the offsets. Caller memory is
 * read or written only during the call. Each returns 0, or a negative code (results_out
 * untouched) for a store not set up, NULL arrays or count over 4096.
 * ------------------------------------------------------------------------------------------ */

/* Opens a put session for each key: object keys[i] of sizes[i] bytes is placed and reserved,
 * invisible until mooncake_store_batch_put_session_end. results_out[i] is 0 or a negative
 * code (MOONCAKE_ERR_OBJECT_ALREADY_EXISTS: the key is stored, or has a session open in
 * this store already). */
int mooncake_store_batch_put_session_start(mooncake_store_t store, const char **keys,
                                           const size_t *sizes, size_t count,
                                           const mooncake_replicate_config_t *config,
                                           int *results_out);

/* Writes ranges of objects whose put session is open: range j of key i is sizes[j] bytes
 * from buffers[j] at offset dst_offsets[j] of the object. results_out[i] is the bytes
 * written for key i (the sum of its sizes) or a negative code (MOONCAKE_ERR_INVALID_PARAMS:
 * no session, or a range outside the object; a failed write fails the key's session, which
 * then can only be revoked). */
int mooncake_store_batch_put_from_multi_buffer_ranges(mooncake_store_t store, const char **keys,
                                                      size_t count, void *const *buffers,
                                                      const size_t *sizes,
                                                      const uint64_t *dst_offsets,
                                                      const size_t *range_counts,
                                                      int64_t *results_out);

/* Ends put sessions: each key whose ranges cover its object is made visible; all of them in
 * one commit. results_out[i] is 0 or a negative code (MOONCAKE_ERR_INVALID_PARAMS: no
 * session, or bytes never written; MOONCAKE_ERR_INVALID_VERSION: the reservation is gone).
 * A failed key's session stays for mooncake_store_batch_put_session_revoke. */
int mooncake_store_batch_put_session_end(mooncake_store_t store, const char **keys,
                                         size_t count, int *results_out);

/* Abandons put sessions: nothing of them becomes visible and their space is freed at once.
 * results_out[i] is 0, or MOONCAKE_ERR_INVALID_PARAMS when the key has no session. */
int mooncake_store_batch_put_session_revoke(mooncake_store_t store, const char **keys,
                                            size_t count, int *results_out);

/* Opens (or refreshes) a get session for each key: one lookup, after which ranged reads go
 * straight to the workers. results_out[i] is 0 or a negative code
 * (MOONCAKE_ERR_OBJECT_NOT_FOUND). */
int mooncake_store_batch_get_session_start(mooncake_store_t store, const char **keys,
                                           size_t count, int *results_out);

/* Reads ranges of objects whose get session is open: range j of key i is sizes[j] bytes at
 * offset src_offsets[j] of the object into buffers[j]. results_out[i] is the bytes read for
 * key i or a negative code (MOONCAKE_ERR_INVALID_PARAMS: no session, or a range past the
 * end; an object removed or replaced since the start fails and ends its session). */
int mooncake_store_batch_get_into_multi_buffer_ranges(mooncake_store_t store, const char **keys,
                                                      size_t count, void *const *buffers,
                                                      const size_t *sizes,
                                                      const uint64_t *src_offsets,
                                                      const size_t *range_counts,
                                                      int64_t *results_out);

/* Ends get sessions (a key with none is ignored). Returns 0, or a negative code for a store
 * not set up, NULL keys or count over 4096. */
int mooncake_store_batch_get_session_end(mooncake_store_t store, const char **keys,
                                         size_t count);

/* ------------------------------------------------------------------------------------------
 * KV sessions (extension: Mooncake's Python pin_kv_session ... attach_kv_session; docs/clib.md)
 *
 * A session is an application's conversation id (1 to 4096 bytes), shared by every client
 * naming it; its members are keys of stored objects. Attach creates a session on its first
 * member; a session whose last member goes (detached, removed, evicted) is gone with its pin.
 * The cluster keeps sessions in its replicated state: they survive a master failover. Thread
 * safe; each call is one or more round trips to the leader.
 * ------------------------------------------------------------------------------------------ */

/* Pins (unpins) a session: its members get soft-pin priority; no TTL. Returns 0,
 * MOONCAKE_ERR_SESSION_NOT_FOUND when no session has that id, MOONCAKE_ERR_INVALID_PARAMS for
 * a bad id. */
int mooncake_store_pin_kv_session(mooncake_store_t store, const char *session_id);
int mooncake_store_unpin_kv_session(mooncake_store_t store, const char *session_id);

/* Keeps only the members named in keep_keys (count keys: the complete keep set, at most
 * 1,000,000; never split it into several calls). Unknown keys are ignored, objects are never
 * deleted, an absent session is no error. Returns 0 or a negative code
 * (MOONCAKE_ERR_SESSION_LIMIT_EXCEEDED for a keep set over the limit). */
int mooncake_store_update_kv_session(mooncake_store_t store, const char *session_id,
                                     const char **keep_keys, size_t count);

/* Removes every member of the session, and so the session; objects stay. 0 also when no
 * session has that id. */
int mooncake_store_close_kv_session(mooncake_store_t store, const char *session_id);

/* Writes the session's pin (0 or 1) and member count. Returns 0 or a negative code
 * (MOONCAKE_ERR_SESSION_NOT_FOUND). */
int mooncake_store_get_kv_session(mooncake_store_t store, const char *session_id,
                                  int *pinned_out, uint64_t *member_count_out);

/* Lists up to limit (1 to 4096) member keys sorting after cursor (exclusive; NULL or "" for
 * the first page). On success *keys_out points at library memory the caller frees with
 * mooncake_store_free_buffer: every key, then the next page's cursor ("" on the last page),
 * each NUL-terminated; the total length is returned. On failure a negative code is returned
 * and *keys_out is NULL. */
int64_t mooncake_store_list_kv_session_keys(mooncake_store_t store, const char *session_id,
                                            const char *cursor, size_t limit, void **keys_out);

/* Adds keys to the session, creating it (unpinned) on its first member. results_out[i] is 0
 * (attached, or a member already), MOONCAKE_ERR_OBJECT_NOT_FOUND or
 * MOONCAKE_ERR_SESSION_LIMIT_EXCEEDED. Returns 0, or a negative code for the whole call (a bad
 * id, count over 4096). */
int mooncake_store_attach_kv_session(mooncake_store_t store, const char *session_id,
                                     const char **keys, size_t count, int *results_out);

/* Extension: reads the object into memory the library allocates. On success *buffer_out
 * points at the object's bytes and the size (> 0) is returned; the caller owns the memory
 * and releases it with mooncake_store_free_buffer. On failure a negative code is returned
 * and *buffer_out is set to NULL. */
int64_t mooncake_store_get_buffer(mooncake_store_t store, const char *key, void **buffer_out);

/* Extension: mooncake_store_get_buffer for count keys in parallel. buffers_out[i] and
 * results_out[i] (count entries each) are item i's buffer (NULL on failure) and its size or
 * negative code. The caller frees every non-NULL buffers_out[i] with
 * mooncake_store_free_buffer. Returns 0, or a negative code (nothing written). */
int mooncake_store_batch_get_buffer(mooncake_store_t store, const char **keys, size_t count,
                                    void **buffers_out, int64_t *results_out);

/* Extension: releases memory the library returned (get_buffer, batch_get_buffer,
 * get_replica_desc). NULL is ignored. Each buffer is freed exactly once. */
void mooncake_store_free_buffer(void *buffer);

/* ------------------------------------------------------------------------------------------
 * Existence, size, descriptors, hostname
 * ------------------------------------------------------------------------------------------ */

/* Returns 1 when the key is committed, 0 when not, a negative code on failure. */
int mooncake_store_is_exist(mooncake_store_t store, const char *key);

/* results_out[i] (count entries) is 1, 0 or -1 (an error; see last_error) for keys[i].
 * Returns 0, or a negative code (results_out untouched) for bad arguments. On a failure of
 * the whole call (no master) every entry is -1 and 0 is returned, as Mooncake. */
int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count,
                                  int *results_out);

/* Returns the object's size (> 0) or a negative code (MOONCAKE_ERR_OBJECT_NOT_FOUND). */
int64_t mooncake_store_get_size(mooncake_store_t store, const char *key);

/* Extension: describes the object's replicas as JSON text, NUL-terminated, in library
 * memory the caller frees with mooncake_store_free_buffer. Returns its length (excluding
 * the NUL) and sets *json_out, or a negative code and sets *json_out to NULL. The text:
 *   {"key":"k","size":N,"version":V,"replicas":[
 *     {"segment_name":"<worker id>","address":"host:port","status":"COMPLETE",
 *      "type":"memory"}, ...]}
 * ("type" is "memory": a worker answers from DRAM or its NVMe tier alike.) */
int64_t mooncake_store_get_replica_desc(mooncake_store_t store, const char *key, char **json_out);

/* Writes this store's address, NUL-terminated, into buf_out (buf_len bytes), in Mooncake's
 * form "<local_hostname>:<port>": the port given in local_hostname, else one picked at setup
 * from 12300-14300 (as Mooncake picks its transfer port); the embedded worker, when it runs,
 * listens there (so the address is usable as a preferred segment).
 * Returns 0, or MOONCAKE_ERR_INVALID_PARAMS when buf_out is NULL or too small. */
int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len);

/* ------------------------------------------------------------------------------------------
 * Remove. force is accepted and ignored: objects here have no leases to wait for, and
 * readers already reading an object finish before its memory is freed.
 * ------------------------------------------------------------------------------------------ */

/* Returns 0, or a negative code (MOONCAKE_ERR_OBJECT_NOT_FOUND for a missing key). */
int mooncake_store_remove(mooncake_store_t store, const char *key, int force);

/* Removes every object of the store's tenant whose key matches pattern (RE2 syntax, as Go's
 * regexp; matched against the key as the store gave it) and returns
 * how many it removed, or a negative code (a bad pattern: MOONCAKE_ERR_INVALID_PARAMS). */
int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force);

/* Removes every object of the store's tenant (mooncake_store_set_tenant_id; other tenants'
 * objects stay); returns how many, or a negative code. */
int64_t mooncake_store_remove_all(mooncake_store_t store, int force);

/* Extension: results_out[i] (count entries) is 0 or keys[i]'s negative code. Returns 0, or
 * a negative code (results_out untouched) for bad arguments. */
int mooncake_store_batch_remove(mooncake_store_t store, const char **keys, size_t count, int force,
                                int *results_out);

/* ------------------------------------------------------------------------------------------
 * Buffer registration. Over TCP nothing needs pinning, so registration only records
 * [buffer, buffer + size) for the checks that Mooncake makes against it
 * (mooncake_store_get_into_ranges); put_from and get_into work on any caller memory.
 * ------------------------------------------------------------------------------------------ */

/* Records the buffer. Registering an address again replaces its size. Returns 0, or
 * MOONCAKE_ERR_INVALID_PARAMS for NULL or size 0. */
int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size);

/* Forgets the buffer registered at this address. Returns 0, or MOONCAKE_ERR_INVALID_PARAMS
 * when no buffer is registered there. */
int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer);

/* ------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------ */

/* Extension: the one-line description of the last failure of a mooncake_store_* call on the
 * calling thread ("" when there was none). Thread-local, like errno: other threads' calls
 * do not change it, successful calls do not clear it. The text belongs to the library and
 * stays valid until the next failing call on this thread; copy it to keep it. */
const char *mooncake_store_last_error(void);

/* Extension: the name of a code ("OBJECT_NOT_FOUND"), or "UNKNOWN"; static text. */
const char *mooncake_store_error_name(int code);

#endif /* MOONCAKE_STORE_TYPES_ONLY */

#ifdef __cplusplus
}
#endif

#endif /* MOONCAKE_STORE_H */
