package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
)

// noteNoEffect records one notice for each of Mooncake's flags without effect (of the table,
// server/config) that the command kind was given with a value other than Mooncake's
// default: "accepted, no effect here: <why>". skip names flags whose notice the caller
// words itself.
func noteNoEffect(fs *pflag.FlagSet, fc *fileConfig, kind config.Kind, skip ...string) {
	for _, line := range config.NoEffect(fs, kind, skip...) {
		fc.note(false, "%s", line)
	}
}

// rpcInterfaceAddr returns the first IPv4 address of the network interface name (Mooncake's
// --rpc_interface).
func rpcInterfaceAddr(name string, addrs func(string) ([]string, error)) (string, error) {
	as, err := addrs(name)
	if err != nil {
		return "", fmt.Errorf("%w: --rpc_interface %s: %v", base.ErrInvalidParams, name, err)
	}
	for _, a := range as {
		ip, _, _ := strings.Cut(a, "/")
		if strings.Count(ip, ".") == 3 {
			return ip, nil
		}
	}
	return "", fmt.Errorf("%w: --rpc_interface %s has no IPv4 address", base.ErrInvalidParams, name)
}

// interfaceAddrs lists the addresses (CIDR) of the network interface name.
func interfaceAddrs(name string) ([]string, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out, nil
}
