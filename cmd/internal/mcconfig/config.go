package mcconfig

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
)

// EnvConfigPath names a mooncake.json (Mooncake's variable, declared in the config table).
const EnvConfigPath = config.EnvConfigPath

// EnvMaster is the default master address list of the client commands and the C library.
const EnvMaster = config.EnvMaster

// ParseAddressList and CheckHostPort are the config table's (server/config).
var (
	ParseAddressList = config.ParseAddressList
	CheckHostPort    = config.CheckHostPort
)

// ClientFile is what a client library takes from the mooncake.json MOONCAKE_CONFIG_PATH
// names: the keys the config table marks for the embedded client (config.KindEmbedded: the
// masters and the cluster id), parsed and checked by the table. Its other keys are the CLI's
// to check (`mooncake` refuses unknown ones); a library loaded into an application (whose
// file may also carry SGLang's or vLLM's keys) reads these and leaves the rest alone.
type ClientFile struct {
	MasterServerAddress []string
	ClusterID           string
	// Path is where the file was read from; "" when the variable is unset.
	Path string
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
	file, err := config.ParseFile(data, config.KindEmbedded)
	if err != nil {
		if errors.Is(err, base.ErrInvalidParams) || errors.Is(err, base.ErrNotSupported) {
			return nil, fmt.Errorf("config %s: %w", path, err) // keep its class
		}
		return nil, fmt.Errorf("%w: config %s: %v", base.ErrInvalidParams, path, err)
	}
	return &ClientFile{MasterServerAddress: file.MasterServerAddress, ClusterID: file.ClusterID, Path: path}, nil
}
