// Command tlogcheck verifies KernelIndex checkpoints, heads notes and Merkle proofs with the
// Go reference implementation (golang.org/x/mod/sumdb/note and sumdb/tlog), independently
// of the project's own Python code.
//
// It reads one JSON document on stdin and writes one JSON result per item on stdout:
//
//	{"vkey": "<origin>+<hash>+<base64 key>",
//	 "notes": ["<signed note>", ...],
//	 "inclusion": [{"size": N, "root": "<b64>", "index": I, "data": "<b64 leaf data>",
//	                "proof": ["<b64>", ...]}, ...],
//	 "consistency": [{"size1": M, "root1": "<b64>", "size2": N, "root2": "<b64>",
//	                  "proof": ["<b64>", ...]}, ...]}
//
// A note is accepted when note.Open verifies it under vkey; a checkpoint's size and root
// lines are then parsed here. Inclusion is tlog.CheckRecord over tlog.RecordHash(data),
// consistency tlog.CheckTree.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	Size  int64    `json:"size"`
	Root  string   `json:"root"`
	Index int64    `json:"index"`
	Data  string   `json:"data"`
	Proof []string `json:"proof"`
}

type consistency struct {
	Size1 int64    `json:"size1"`
	Root1 string   `json:"root1"`
	Size2 int64    `json:"size2"`
	Root2 string   `json:"root2"`
	Proof []string `json:"proof"`
}

type input struct {
	VKey        string        `json:"vkey"`
	Notes       []string      `json:"notes"`
	Inclusion   []inclusion   `json:"inclusion"`
	Consistency []consistency `json:"consistency"`
}

type result struct {
	Kind  string `json:"kind"`
	Index int    `json:"index"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Text  string `json:"text,omitempty"`
	Size  int64  `json:"size,omitempty"`
	Root  string `json:"root,omitempty"`
}

func hash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return h, err
	}
	if len(raw) != tlog.HashSize {
		return h, fmt.Errorf("hash is %d bytes", len(raw))
	}
	copy(h[:], raw)
	return h, nil
}

func hashes(list []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, 0, len(list))
	for _, s := range list {
		h, err := hash(s)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func checkNote(verifiers note.Verifiers, text string) result {
	n, err := note.Open([]byte(text), verifiers)
	if err != nil {
		return result{Error: err.Error()}
	}
	r := result{OK: true, Text: n.Text}
	// A checkpoint (origin, size, root, ...): report what it commits to.
	lines := strings.Split(n.Text, "\n")
	if len(lines) >= 3 {
		if size, err := strconv.ParseInt(lines[1], 10, 64); err == nil {
			if _, err := hash(lines[2]); err == nil {
				r.Size, r.Root = size, lines[2]
			}
		}
	}
	return r
}

func checkInclusion(item inclusion) error {
	root, err := hash(item.Root)
	if err != nil {
		return err
	}
	data, err := base64.StdEncoding.DecodeString(item.Data)
	if err != nil {
		return err
	}
	proof, err := hashes(item.Proof)
	if err != nil {
		return err
	}
	return tlog.CheckRecord(proof, item.Size, root, item.Index, tlog.RecordHash(data))
}

func checkConsistency(item consistency) error {
	root1, err := hash(item.Root1)
	if err != nil {
		return err
	}
	root2, err := hash(item.Root2)
	if err != nil {
		return err
	}
	proof, err := hashes(item.Proof)
	if err != nil {
		return err
	}
	return tlog.CheckTree(proof, item.Size2, root2, item.Size1, root1)
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "tlogcheck: bad input:", err)
		os.Exit(2)
	}
	verifier, err := note.NewVerifier(in.VKey)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tlogcheck: bad verifier key:", err)
		os.Exit(2)
	}
	verifiers := note.VerifierList(verifier)
	var out []result
	for i, text := range in.Notes {
		r := checkNote(verifiers, text)
		r.Kind, r.Index = "note", i
		out = append(out, r)
	}
	for i, item := range in.Inclusion {
		r := result{Kind: "inclusion", Index: i, OK: true}
		if err := checkInclusion(item); err != nil {
			r.OK, r.Error = false, err.Error()
		}
		out = append(out, r)
	}
	for i, item := range in.Consistency {
		r := result{Kind: "consistency", Index: i, OK: true}
		if err := checkConsistency(item); err != nil {
			r.OK, r.Error = false, err.Error()
		}
		out = append(out, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(2)
	}
}
