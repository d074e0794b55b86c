package mcconfig

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

// EnvConfigPath names a mooncake.json (Mooncake's variable).
const EnvConfigPath = "MOONCAKE_CONFIG_PATH"

// EnvMaster is the default master address list of the client commands.
const EnvMaster = "MOONCAKE_MASTER"

// File is a mooncake.json with Mooncake's keys. Every key is optional; a key that is not
// listed here is an error (json.Decoder.DisallowUnknownFields), so a typo is never ignored.
// Flags given on the command line override the file.
type File struct {
	LocalHostname       string      `json:"local_hostname"`
	MasterServerAddress AddressList `json:"master_server_address"`
	GlobalSegmentSize   *base.Bytes `json:"global_segment_size"`
	LocalBufferSize     *base.Bytes `json:"local_buffer_size"`
	Protocol            string      `json:"protocol"`
	DeviceName          string      `json:"device_name"`
	RootFSDir           string      `json:"root_fs_dir"`
	ClusterID           string      `json:"cluster_id"`
	// MetadataServer is Mooncake's etcd/HTTP metadata service. Raft replaces it: the key is
	// accepted so existing files keep working, and ignored with a notice.
	MetadataServer json.RawMessage `json:"metadata_server"`

	// Path is where the file was read from; "" when there is none.
	Path string `json:"-"`
}

// AddressList accepts "a:1,b:2" or ["a:1", "b:2"].
type AddressList []string

// UnmarshalJSON accepts both spellings.
func (l *AddressList) UnmarshalJSON(p []byte) error {
	var s string
	if err := json.Unmarshal(p, &s); err == nil {
		v, err := ParseAddressList(s)
		*l = v
		return err
	}
	var list []string
	if err := json.Unmarshal(p, &list); err != nil {
		return fmt.Errorf("%w: want a string \"host:port,host:port\" or a list of strings", base.ErrInvalidParams)
	}
	var out []string
	for _, s := range list {
		v, err := ParseAddressList(s)
		if err != nil {
			return err
		}
		out = append(out, v...)
	}
	*l = out
	return nil
}

// ParseAddressList splits "a:1, b:2" and checks each host:port.
func ParseAddressList(s string) ([]string, error) {
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
		if err := CheckHostPort(a, true); err != nil {
			return nil, fmt.Errorf("master address %q: %w", a, err)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no master address given", base.ErrInvalidParams)
	}
	return out, nil
}

// CheckHostPort checks host:port; port 0 ("pick a free port") is allowed when !needPort.
func CheckHostPort(a string, needPort bool) error {
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

// Load reads the file MOONCAKE_CONFIG_PATH names, or returns an empty config when
// the variable is unset. Unknown keys, bad values and trailing data are errors.
func Load(getenv func(string) string) (*File, error) {
	path := getenv(EnvConfigPath)
	if path == "" {
		return &File{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvConfigPath, err)
	}
	defer f.Close()
	fc, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	fc.Path = path
	return fc, nil
}

// Parse decodes and checks one mooncake.json.
func Parse(r io.Reader) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("%w: the file is over 1 MiB", base.ErrInvalidParams)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var fc File
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
		if err := ValidateClusterID(fc.ClusterID); err != nil {
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

// ValidateClusterID allows what a directory name under root_fs_dir can hold.
func ValidateClusterID(id string) error { return validateName("cluster id", id) }

// ValidateMasterID allows the same characters as a cluster id (a master id names a raft
// server and appears in paths and status output).
func ValidateMasterID(id string) error { return validateName("master id", id) }

func validateName(what, id string) error {
	if err := base.ValidateWorkerID(base.WorkerID(id)); err != nil {
		return fmt.Errorf("%w: %s %q: only letters, digits, '.', '_' and '-' are allowed", base.ErrInvalidParams, what, id)
	}
	return nil
}
