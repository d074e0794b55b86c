//go:build !linux

package admin

// ProcessRSS is unknown off Linux.
func ProcessRSS() int64 { return 0 }
