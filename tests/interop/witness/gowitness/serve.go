package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type logFlags []string

func (l *logFlags) String() string     { return strings.Join(*l, ",") }
func (l *logFlags) Set(v string) error { *l = append(*l, v); return nil }

type treeHead struct {
	size int64
	root tlog.Hash
}

// witness keeps, per origin, the latest tree it cosigned; one mutex makes the old-size
// check and the update a single step.
type witness struct {
	signer *cosigner
	logs   map[string]note.Verifiers
	mu     sync.Mutex
	heads  map[string]treeHead
}

var emptyRoot = tlog.Hash(sha256.Sum256(nil))

type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, format string, args ...interface{}) *refusal {
	return &refusal{status, fmt.Sprintf(format, args...)}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	name := fs.String("name", "", "witness name")
	seed := fs.String("seed", "", "Ed25519 seed, 64 hex digits")
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	var logs logFlags
	fs.Var(&logs, "log", "ORIGIN=VKEY of a log to follow (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw, err := hex.DecodeString(*seed)
	if err != nil || len(raw) != ed25519.SeedSize {
		return errors.New("-seed must be 64 hex digits")
	}
	w := &witness{
		signer: &cosigner{name: *name, priv: ed25519.NewKeyFromSeed(raw)},
		logs:   map[string]note.Verifiers{},
		heads:  map[string]treeHead{},
	}
	for _, l := range logs {
		i := strings.LastIndex(l, "=")
		if i < 0 {
			return fmt.Errorf("-log %q is not ORIGIN=VKEY", l)
		}
		v, err := note.NewVerifier(l[i+1:])
		if err != nil {
			return fmt.Errorf("-log %q: %v", l, err)
		}
		w.logs[l[:i]] = note.VerifierList(v)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Printf("vkey %s\nlistening http://%s\n", w.signer.vkey(), ln.Addr())
	os.Stdout.Sync()
	mux := http.NewServeMux()
	mux.HandleFunc("/add-checkpoint", w.addCheckpoint)
	return http.Serve(ln, mux)
}

func (w *witness) addCheckpoint(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", "POST")
		http.Error(rw, "add-checkpoint takes POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	sigs, err := w.process(body)
	var known *treeHead
	if c, ok := err.(*conflict); ok {
		known = &c.head
	}
	switch {
	case known != nil:
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", known.size)
	case err != nil:
		status := http.StatusInternalServerError
		if ref, ok := err.(*refusal); ok {
			status = ref.status
		}
		http.Error(rw, err.Error(), status)
	default:
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Write(sigs)
	}
}

type conflict struct{ head treeHead }

func (c *conflict) Error() string { return "old size is not the size last cosigned" }

func parseRequest(body []byte) (int64, tlog.TreeProof, []byte, error) {
	head, noteBytes, ok := bytes.Cut(body, []byte("\n\n"))
	if !ok {
		return 0, nil, nil, refuse(400, "no blank line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	if !strings.HasPrefix(lines[0], "old ") {
		return 0, nil, nil, refuse(400, "first line is not 'old <size>'")
	}
	sizeText := lines[0][len("old "):]
	old, err := strconv.ParseInt(sizeText, 10, 64)
	if err != nil || old < 0 || strconv.FormatInt(old, 10) != sizeText {
		return 0, nil, nil, refuse(400, "malformed old size")
	}
	if len(lines)-1 > 63 {
		return 0, nil, nil, refuse(400, "more than 63 proof lines")
	}
	proof := make(tlog.TreeProof, 0, len(lines)-1)
	for _, line := range lines[1:] {
		raw, err := base64.StdEncoding.Strict().DecodeString(line)
		if err != nil || len(raw) != tlog.HashSize {
			return 0, nil, nil, refuse(400, "malformed proof line")
		}
		var h tlog.Hash
		copy(h[:], raw)
		proof = append(proof, h)
	}
	return old, proof, noteBytes, nil
}

// parseCheckpoint reads origin, size and root (tlog.ParseTree wants the go.sum header).
func parseCheckpoint(text string) (string, treeHead, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return "", treeHead{}, refuse(400, "checkpoint has fewer than three lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return "", treeHead{}, refuse(400, "malformed tree size")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		return "", treeHead{}, refuse(400, "malformed root hash")
	}
	var root tlog.Hash
	copy(root[:], raw)
	return lines[0], treeHead{size, root}, nil
}

func (w *witness) process(body []byte) ([]byte, error) {
	old, proof, noteBytes, err := parseRequest(body)
	if err != nil {
		return nil, err
	}
	origin, _, _ := strings.Cut(string(noteBytes), "\n")
	verifiers, ok := w.logs[origin]
	if !ok {
		return nil, refuse(404, "unknown origin")
	}
	n, err := note.Open(noteBytes, verifiers)
	switch err.(type) {
	case nil:
	case *note.UnverifiedNoteError, *note.InvalidSignatureError:
		return nil, refuse(403, "%v", err)
	default:
		return nil, refuse(400, "%v", err)
	}
	cpOrigin, head, err := parseCheckpoint(n.Text)
	if err != nil {
		return nil, err
	}
	if cpOrigin != origin {
		return nil, refuse(400, "origin mismatch")
	}
	if old > head.size {
		return nil, refuse(400, "old size above the checkpoint size")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	known, seen := w.heads[origin]
	if !seen {
		known = treeHead{0, emptyRoot}
	}
	if old != known.size {
		return nil, &conflict{known}
	}
	if err := consistent(old, known.root, head, proof); err != nil {
		return nil, err
	}
	w.heads[origin] = head
	signed, err := note.Sign(&note.Note{Text: n.Text}, w.signer)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndex(signed, []byte("\n\n"))
	return signed[i+2:], nil
}

func consistent(old int64, oldRoot tlog.Hash, head treeHead, proof tlog.TreeProof) error {
	switch {
	case head.size == 0 && head.root != emptyRoot:
		return refuse(422, "size 0 needs the empty-tree root")
	case old == 0 && len(proof) > 0:
		return refuse(422, "a proof from size 0 must be empty")
	case old == 0:
		return nil
	case old == head.size:
		if len(proof) > 0 || head.root != oldRoot {
			return refuse(422, "same size, different root")
		}
		return nil
	}
	if err := tlog.CheckTree(proof, head.size, head.root, old, oldRoot); err != nil {
		return refuse(422, "consistency proof: %v", err)
	}
	return nil
}
