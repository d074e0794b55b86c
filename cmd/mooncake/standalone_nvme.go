package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
)

// The one-machine default keeps its cache (issue 24, item 6): `mooncake standalone` with no
// flags spills to an NVMe tier under its data dir, so a restart restores what it held. The
// tier's directory and its share of the disk are decided here, before the worker starts, so
// that a disk too small is refused with a line that says what to do instead of a worker that
// starts and fails every spill.
const (
	// standaloneNVMeSubdir is the NVMe tier's directory under --data_dir (the master's raft
	// data is under "master" beside it).
	standaloneNVMeSubdir = "nvme"
	// standaloneNVMeShare of the free disk (plus what the tier already holds) is the default
	// tier's capacity. A quarter, not nvme's 90%: the default runs on a developer's or an
	// inference host's system disk, which has other tenants; --ssd_capacity or --root_fs_dir
	// (which takes nvme's 90%) give more.
	standaloneNVMeShare = 0.25
)

// standaloneNVMeMin is the smallest default tier standalone starts with: the default
// global_segment_size, so a SIGTERM can spill a full default DRAM segment.
var standaloneNVMeMin = config.WorkerDefaults.GlobalSegmentSize

// standaloneNVMeCapacity is the default tier's capacity on a disk with avail bytes free when
// the tier already holds used bytes; an error when that is under standaloneNVMeMin.
func standaloneNVMeCapacity(dir string, used, avail int64) (int64, error) {
	c := used + int64(float64(avail)*standaloneNVMeShare)
	if c < int64(standaloneNVMeMin) {
		return 0, fmt.Errorf("%w: standalone's NVMe tier under %s would get %s (%d%% of the %s free on its disk, plus the %s it holds), under the %s it needs; "+
			"free some disk, put --data_dir on a larger disk, give --ssd_capacity, or run with --dram_only (objects are then lost on a restart)",
			base.ErrInvalidParams, dir, base.Bytes(c), int(standaloneNVMeShare*100), base.Bytes(avail), base.Bytes(used), base.Bytes(standaloneNVMeMin))
	}
	return c, nil
}

// standaloneNVMeDefault sizes the default tier at dir: it measures what dir already holds
// (a restart's tier) and the free space of the filesystem dir is (or will be) on.
func standaloneNVMeDefault(dir string) (int64, error) {
	used, err := dirBytes(dir)
	if err != nil {
		return 0, fmt.Errorf("standalone NVMe tier %s: %w", dir, err)
	}
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil {
			break
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			break
		}
		probe = parent
	}
	du, err := vfs.Default.GetDiskUsage(probe)
	if err != nil {
		return 0, fmt.Errorf("standalone NVMe tier %s: free disk space: %w (give --ssd_capacity, or run with --dram_only)", dir, err)
	}
	return standaloneNVMeCapacity(dir, used, int64(du.AvailBytes))
}

// dirBytes sums the sizes of the regular files under dir (0 when dir does not exist yet).
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return n, err
}
