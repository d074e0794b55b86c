package transfer

import "syscall"

// syscallEMFILE is "too many open files", which Accept survives by backing off.
var syscallEMFILE = syscall.EMFILE
