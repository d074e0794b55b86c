// Package nvme is the worker's persistent tier under root_fs_dir/<cluster_id>/<worker_id>/: a
// Pebble DB as the index (which also holds small values inline), large values in append-only
// extent files written in aligned blocks (O_DIRECT where the filesystem allows it), lz4 per
// object where it pays, a HighwayHash checksum (base.Checksum) on every object verified on
// every read, recovery on Open and garbage collection of extents.
//
// *Store implements tier.Lower: Put, Stat, ReadInto, Delete, Scan. It must never import dram,
// tier, raftmeta, transfer, server, client or cmd; only internal/.
//
// # Directory layout
//
//	<Dir>/index/                pebble DB: the index and inline values
//	<Dir>/extents/<id>.ext      extent files, id = 16 lowercase hex digits, never reused
//	<Dir>/ballast               zeros: room the index takes if the disk fills (ballast.go)
//
// # Index (pebble)
//
// Keys are a one-byte namespace followed by the rest:
//
//	'o' + object key   -> index entry (below)
//	"mformat"          -> "2", the index format version; Open refuses any other
//
// An index entry (all integers little-endian):
//
//	+--------+-------+--------------+-------------+-------------+-------------+---------------+
//	| format | flags | reserved (6B)| version (8B)| size (8B)   | stored (8B) | checksum (8B) |
//	|  (1B)=1| (1B)  |   zero       |             | object bytes| stored bytes| HighwayHash-64|
//	+--------+-------+--------------+-------------+-------------+-------------+---------------+
//	then, if flags has INLINE:    | stored bytes (stored B)             |
//	     otherwise:               | extent id (8B) | record offset (8B) |
//
//	flags: bit 0 LZ4 (stored bytes are one lz4 block), bit 1 INLINE,
//	       bit 2 QUARANTINED (a read found a mismatch; never served, not in Scan)
//
// checksum is base.Checksum of the object's uncompressed bytes, the same value the client sent
// in PutEnd. A value is inline when its stored form is at most Options.InlineThreshold bytes
// (64 KiB by default).
//
// # Extent files
//
// An extent file is a header block followed by records, each starting on a 4 KiB boundary and
// zero-padded to the next one, so the files can be written with O_DIRECT and walked, verified
// and re-indexed without pebble.
//
//	offset 0:   extent header block (4096 B)
//	+----------------+-------------+----------+-----------------+---------------+---------+
//	| magic (8B)     | format (2B) | zero (2B)| block size (4B) | extent id (8B)| hcrc(4B)|
//	| "MCNVMEXT"     | = 1         |          | = 4096          |               |         |
//	+----------------+-------------+----------+-----------------+---------------+---------+
//	hcrc = low 32 bits of base.Checksum(bytes 0..23); bytes 28..4095 are zero.
//
//	offset 4096, then every record at a multiple of 4096:
//	+-----------+-----------+------------+-----------+------------+-----------+
//	| magic (4B)| hcrc (4B) | format (1B)| flags (1B)| keylen (2B)| zero (4B) |
//	| "MCR1"    |           | = 2        | bit0 LZ4  | 1..4096    |           |
//	+-----------+-----------+------------+-----------+------------+-----------+
//	| version (8B)          | size (8B)              | stored (8B)            |
//	+-----------------------+------------------------+------------------------+
//	| checksum (8B)         | key (keylen B)  | zero padding to 4 KiB |
//	+-----------------------+-----------------+-----------------------+
//	at record offset + align4K(48+keylen) (4096, or 8192 for keys over 4048 bytes):
//	| stored bytes (stored B)                | zero padding to 4 KiB  |
//	+----------------------------------------+------------------------+
//	hcrc = low 32 bits of base.Checksum(bytes 8 .. 48+keylen): the header checksum covers every
//	field after it and the key, so a torn or overwritten header is detected before the data
//	is read. checksum covers the object (after decompression).
//
//	Format 2 starts the stored bytes on a block boundary so that Put can write them with
//	O_DIRECT straight from the caller's (block-aligned) memory; format 1, which had them right
//	after the key, is not read (its stores have index format "1", which Open refuses).
//
// A record is live when the index entry of its key points at (extent id, offset); everything
// else (overwritten, deleted, a torn tail after a crash, a write whose index commit never
// happened) is dead space: punched out of the file (fallocate PUNCH_HOLE) once the index change
// that killed it is synced, where the filesystem supports it (reclaim.go), else reclaimed by GC
// copying the live records out. Punched ranges read as zeros, and no index entry points at
// one. Rebuilding an index from extents alone would also
// bring back objects deleted since their extent was last collected (deletes live only in the
// index); that tool does not exist yet.
//
// # Writes and durability
//
// Put reserves the record's aligned length at the end of the active extent (concurrent Puts
// write in parallel) and writes it: the stored bytes with one pwrite from the caller's memory
// (when it is block-aligned, or the extent is buffered) while the calling goroutine computes
// the checksum, then the header block(s) and the zero-padded last partial block of the data;
// an unaligned source under O_DIRECT is copied into 4 KiB-aligned buffers of up to 4 MiB,
// up to 4 in flight while the next is copied and checksummed, and the header written last.
// Then - for a durable write - Put waits for a group fdatasync of the extent, and only then
// commits the index entry (pebble, synced for durable writes). The index never points at bytes that were not
// written, so a failed or refused write (disk full, capacity, I/O error) changes nothing
// visible. See SyncPolicy for what each policy syncs and when.
//
// A crash between the extent write and the index commit leaves an unreferenced record: dead
// space. A sync=false write under SyncGroup/SyncNone whose index entry reached disk but whose
// extent bytes did not (power loss only; a process crash keeps both in the page cache) is
// dropped at Open if its header is missing, or found by the read checksum and quarantined.
//
// # Reads
//
// ReadInto looks the key up, checks version and length, reads the record header (checked
// against the index entry) and the stored bytes (straight into the caller's buffer when not
// compressed, in chunks of 1 MiB read on a second goroutine while the caller's goroutine
// checks the header and checksums the chunks already read), decompresses if needed and
// verifies the checksum. A mismatch quarantines the
// record: the error wraps base.ErrCorruption, Metrics.Corruptions and Metrics.Quarantined
// count it, and from then on Stat, Scan and ReadInto behave as if the object were absent.
//
// # lz4
//
// Values of 256 bytes and more are lz4-compressed (one block) and the result is kept only if
// it is at least Options.LZ4MinSaving (10%) smaller; values over 64 KiB are first tried on a
// 16 KiB sample from their middle, so incompressible data (fp16 K/V activations) costs one
// small trial, not a full compression. docs/persistence.md has the measured savings.
//
// # Open and GC
//
// Open's recovery steps are listed on Open; GC's crash-safe order on GC; hole punching's in
// reclaim.go. Neither ever needs free disk space to free space.
package nvme
