package config

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
)

// AddressList is a list of masters: "a:1,b:2" or, in JSON, also ["a:1", "b:2"].
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
