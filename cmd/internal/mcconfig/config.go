package mcconfig

import (
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

// EnvMaster is the default master address list of the client commands and the C library.
const EnvMaster = "MOONCAKE_MASTER"

// AddressList accepts "a:1,b:2" or ["a:1", "b:2"].
type AddressList []string

// UnmarshalJSON accepts both spellings and checks every address.
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

// ParseAddressList splits "a:1, b:2" and checks each host:port. A discovery URL
// ("etcd://...") is ErrNotSupported.
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

// ClientFile is what a client library takes from the mooncake.json MOONCAKE_CONFIG_PATH
// names: the masters and the cluster id. Its other keys are the CLI's to check (`mooncake`
// refuses unknown ones); a library loaded into an application (whose file may also carry
// SGLang's or vLLM's keys) reads these two and leaves the rest alone.
type ClientFile struct {
	MasterServerAddress AddressList `json:"master_server_address"`
	ClusterID           string      `json:"cluster_id"`
	// Path is where the file was read from; "" when the variable is unset.
	Path string `json:"-"`
}

// LoadClient reads the client keys of the file MOONCAKE_CONFIG_PATH names (getenv reads the
// environment), or returns an empty ClientFile when the variable is unset. A file that
// cannot be read or is not a JSON object, a bad address or cluster id are errors.
func LoadClient(getenv func(string) string) (*ClientFile, error) {
	path := getenv(EnvConfigPath)
	if path == "" {
		return &ClientFile{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", base.ErrInvalidParams, EnvConfigPath, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, fmt.Errorf("%w: config %s: %v", base.ErrInvalidParams, path, err)
	}
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("%w: config %s is over 1 MiB", base.ErrInvalidParams, path)
	}
	var cf ClientFile
	if err := json.Unmarshal(data, &cf); err != nil {
		if errors.Is(err, base.ErrInvalidParams) || errors.Is(err, base.ErrNotSupported) {
			return nil, fmt.Errorf("config %s: %w", path, err) // a bad address: keep its class
		}
		return nil, fmt.Errorf("%w: config %s: %v", base.ErrInvalidParams, path, err)
	}
	if cf.ClusterID != "" {
		if err := ValidateClusterID(cf.ClusterID); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	cf.Path = path
	return &cf, nil
}
