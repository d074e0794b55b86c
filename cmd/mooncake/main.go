package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "mooncake: the commands arrive with the servers issue")
	os.Exit(2)
}
