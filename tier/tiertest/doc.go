// Package tiertest holds test helpers for tier and its users: MemLower, an in-memory
// tier.Lower with failure injection, so spill, promotion, durable puts and restart can be
// tested without the nvme package.
//
// Only tests may import it. It must never import anything but tier's own vocabulary
// (internal/base) and the standard library.
package tiertest
