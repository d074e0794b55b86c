package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
)

// envConfigPath names a mooncake.json (Mooncake's variable).
const envConfigPath = "MOONCAKE_CONFIG_PATH"

// envMaster is the default master address list of the client commands.
const envMaster = "MOONCAKE_MASTER"

// fileConfig is a mooncake.json with Mooncake's keys. Every key is optional; a key that is not
// listed here is an error (json.Decoder.DisallowUnknownFields), so a typo is never ignored.
// Flags given on the command line override the file.
type fileConfig struct {
	LocalHostname       string      `json:"local_hostname"`
	MasterServerAddress addressList `json:"master_server_address"`
	GlobalSegmentSize   *base.Bytes `json:"global_segment_size"`
	LocalBufferSize     *base.Bytes `json:"local_buffer_size"`
	Protocol            string      `json:"protocol"`
	DeviceName          string      `json:"device_name"`
	RootFSDir           string      `json:"root_fs_dir"`
	ClusterID           string      `json:"cluster_id"`
	// MetadataServer is Mooncake's etcd/HTTP metadata service. Raft replaces it: the key is
	// accepted so existing files keep working, and ignored with a notice.
	MetadataServer json.RawMessage `json:"metadata_server"`
	// EnableSSDOffload with SSDOffloadPath is Mooncake's SSD tier: it maps onto root_fs_dir
	// (compat.go). The other keys below are Mooncake's too, accepted with a notice.
	EnableSSDOffload *bool  `json:"enable_ssd_offload"`
	SSDOffloadPath   string `json:"ssd_offload_path"`
	mooncakeOnlyKeys

	path string // where the file was read from; "" when there is none
	// notices are what resolving the configuration noticed (keys without effect, a protocol
	// run over TCP), printed once by fileNotices.
	notices []notice
	// envMasters is $MOONCAKE_MASTER, which `worker` honours as client commands do.
	envMasters []string
	// devicesWarned: the protocol warning named device_name already (tcpOnly).
	devicesWarned bool
}

// addressList accepts "a:1,b:2" or ["a:1", "b:2"].
type addressList []string

func (l *addressList) UnmarshalJSON(p []byte) error {
	var s string
	if err := json.Unmarshal(p, &s); err == nil {
		v, err := parseAddressList(s)
		*l = v
		return err
	}
	var list []string
	if err := json.Unmarshal(p, &list); err != nil {
		return fmt.Errorf("%w: want a string \"host:port,host:port\" or a list of strings", base.ErrInvalidParams)
	}
	var out []string
	for _, s := range list {
		v, err := parseAddressList(s)
		if err != nil {
			return err
		}
		out = append(out, v...)
	}
	*l = out
	return nil
}

// parseAddressList splits "a:1, b:2" and checks each host:port.
func parseAddressList(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if strings.Contains(a, "://") {
			return nil, fmt.Errorf("%w: master address %q: %s discovery is not supported; list the masters as host:port,host:port",
				base.ErrNotSupported, a, a[:strings.Index(a, "://")])
		}
		if err := checkHostPort(a, true); err != nil {
			return nil, fmt.Errorf("master address %q: %w", a, err)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no master address given", base.ErrInvalidParams)
	}
	return out, nil
}

// checkHostPort checks host:port; port 0 ("pick a free port") is allowed when !needPort.
func checkHostPort(a string, needPort bool) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%w: want host:port: %v", base.ErrInvalidParams, err)
	}
	if host == "" {
		return fmt.Errorf("%w: %q has no host", base.ErrInvalidParams, a)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (needPort && n == 0) {
		return fmt.Errorf("%w: bad port %q", base.ErrInvalidParams, port)
	}
	return nil
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
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var fc fileConfig
	if err := dec.Decode(&fc); err != nil {
		return nil, jsonError(err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", base.ErrInvalidParams)
	}
	switch {
	case fc.GlobalSegmentSize != nil && *fc.GlobalSegmentSize <= 0:
		return nil, fmt.Errorf("%w: global_segment_size must be positive", base.ErrInvalidParams)
	case fc.LocalBufferSize != nil && *fc.LocalBufferSize < 0:
		return nil, fmt.Errorf("%w: local_buffer_size must not be negative", base.ErrInvalidParams)
	case fc.LocalHostname != "" && strings.ContainsAny(fc.LocalHostname, ":/ "):
		return nil, fmt.Errorf("%w: local_hostname %q must be a host name or IP without a port", base.ErrInvalidParams, fc.LocalHostname)
	}
	if fc.ClusterID != "" {
		if err := validateClusterID(fc.ClusterID); err != nil {
			return nil, err
		}
	}
	return &fc, nil
}

// jsonError turns encoding/json's errors into one-line messages naming the key.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: key %q: want %s, got a JSON %s", base.ErrInvalidParams, te.Field, te.Type, te.Value)
	}
	if errors.Is(err, base.ErrInvalidParams) || errors.Is(err, base.ErrNotSupported) {
		return err
	}
	// Unknown keys come back as `json: unknown field "x"`.
	return fmt.Errorf("%w: %v", base.ErrInvalidParams, err)
}

// validateClusterID allows what a directory name under root_fs_dir can hold.
func validateClusterID(id string) error { return validateName("cluster id", id) }

// validateMasterID allows the same characters as a cluster id (a master id names a raft
// server and appears in paths and status output).
func validateMasterID(id string) error { return validateName("master id", id) }

func validateName(what, id string) error {
	if err := base.ValidateWorkerID(base.WorkerID(id)); err != nil {
		return fmt.Errorf("%w: %s %q: only letters, digits, '.', '_' and '-' are allowed", base.ErrInvalidParams, what, id)
	}
	return nil
}
