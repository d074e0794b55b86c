package admin

import (
	"bytes"
	"os"
	"strconv"
)

// ProcessRSS returns this process's resident set in bytes (VmRSS of /proc/self/status), 0
// when it cannot be read.
func ProcessRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(v)
			if len(f) == 2 && string(f[1]) == "kB" {
				n, err := strconv.ParseInt(string(f[0]), 10, 64)
				if err == nil {
					return n << 10
				}
			}
		}
	}
	return 0
}
