package main

import (
	"fmt"
	"io"
	"os"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
)

// The variables, keys and checks are the config table's (server/config), which the C
// library (cmd/libmooncake_store) reads them through too.
const (
	// envConfigPath names a mooncake.json (Mooncake's variable).
	envConfigPath = config.EnvConfigPath
	// envMaster is the default master address list of the client commands.
	envMaster = config.EnvMaster
)

func parseAddressList(s string) ([]string, error) { return config.ParseAddressList(s) }
func checkHostPort(a string, needPort bool) error { return config.CheckHostPort(a, needPort) }

// fileConfig is a mooncake.json with Mooncake's keys, then the MOONCAKE_* variables for what
// it does not set: the table's File (every key optional; a key the table does not declare is
// an error, so a typo is never ignored), with what this command noticed. Flags given on the
// command line override it.
type fileConfig struct {
	config.File

	path string // where the file was read from; "" when there is none
	// notices are what resolving the configuration noticed (keys without effect, a protocol
	// run over TCP), printed once by fileNotices.
	notices []notice
	// devicesWarned: the protocol warning named device_name already (tcpOnly).
	devicesWarned bool
}

// loadFileConfig reads the file MOONCAKE_CONFIG_PATH names, or returns an empty config when
// the variable is unset. Unknown keys, bad values and trailing data are errors.
func loadFileConfig(getenv func(string) string) (*fileConfig, error) {
	path := getenv(envConfigPath)
	if path == "" {
		return &fileConfig{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envConfigPath, err)
	}
	defer f.Close()
	fc, err := parseFileConfig(f)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	fc.path = path
	return fc, nil
}

// loadConfig is loadFileConfig, then Mooncake's MOONCAKE_* variables for what the file does
// not set, then the protocol and SSD-offload mapping (compat.go).
func loadConfig(getenv func(string) string) (*fileConfig, error) {
	fc, err := loadFileConfig(getenv)
	if err != nil {
		return nil, err
	}
	if err := fc.applyMooncake(getenv); err != nil {
		if fc.path != "" {
			return nil, fmt.Errorf("config %s: %w", fc.path, err)
		}
		return nil, err
	}
	return fc, nil
}

func parseFileConfig(r io.Reader) (*fileConfig, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("%w: the file is over 1 MiB", base.ErrInvalidParams)
	}
	f, err := config.ParseFile(data, config.KindFile)
	if err != nil {
		return nil, err
	}
	return &fileConfig{File: *f}, nil
}

// validateClusterID allows what a directory name under root_fs_dir can hold.
func validateClusterID(id string) error { return config.ValidateClusterID(id) }

// validateMasterID allows the same characters as a cluster id (a master id names a raft
// server and appears in paths and status output).
func validateMasterID(id string) error { return config.ValidateMasterID(id) }
