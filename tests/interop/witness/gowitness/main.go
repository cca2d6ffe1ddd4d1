// Command gowitness is an independent implementation, for KernelIndex's interop tests, of both
// sides a witness's cosignature is checked from, over Go's reference note and tlog packages
// (golang.org/x/mod/sumdb, as Debian ships them):
//
//	gowitness serve -name NAME -seed HEX64 -log ORIGIN=VKEY [-log ...] [-listen 127.0.0.1:0]
//
// runs a C2SP tlog-witness (POST /add-checkpoint), printing "vkey <witness vkey>" and
// "listening <url>" on stdout once it accepts connections; and
//
//	gowitness check < {"items": [{"note": "...", "log": "<vkey>", "witnesses": ["<vkey>"]}]}
//
// opens each checkpoint note with note.Open under the log key and the witnesses'
// cosignature/v1 keys and prints one JSON result per item: ok, error, the witnesses whose
// cosignatures verified and their timestamps; and
//
//	gowitness proof < {"items": [{"proof": "<tlog-proof file>", "log": "<vkey>", "witnesses": [...]}]}
//
// checks each C2SP tlog-proof@v1 file: its checkpoint opened as above, and the leaf hash of
// its extra data included at its index (tlog.CheckRecord).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gowitness serve|check|proof ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "check":
		err = check(os.Stdin, os.Stdout)
	case "proof":
		err = proofs(os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gowitness:", err)
		os.Exit(1)
	}
}
