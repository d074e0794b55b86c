package main

import (
	"io"

	"github.com/mooncake-go/mooncake/cmd/internal/mcconfig"
)

// The configuration file and address lists are read by package mcconfig, which the C library
// (cmd/libmooncake_store) shares; these names keep this package's callers unchanged.
const (
	envConfigPath = mcconfig.EnvConfigPath
	envMaster     = mcconfig.EnvMaster
)

type (
	fileConfig  = mcconfig.File
	addressList = mcconfig.AddressList
)

func parseAddressList(s string) ([]string, error)      { return mcconfig.ParseAddressList(s) }
func checkHostPort(a string, needPort bool) error      { return mcconfig.CheckHostPort(a, needPort) }
func parseFileConfig(r io.Reader) (*fileConfig, error) { return mcconfig.Parse(r) }
func validateClusterID(id string) error                { return mcconfig.ValidateClusterID(id) }
func validateMasterID(id string) error                 { return mcconfig.ValidateMasterID(id) }

func loadFileConfig(getenv func(string) string) (*fileConfig, error) {
	return mcconfig.Load(getenv)
}
