package main

// tlog-proof@v1 (c2sp.org/tlog-proof) files checked over x/mod's note and tlog: the header,
// the extra line (the leaf's data), the index and the inclusion proof are read here from the
// specification; note.Open checks the log's signature and the witnesses' cosignatures, and
// tlog.CheckRecord the inclusion of RecordHash(extra) at the index.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type proofItem struct {
	Proof     string   `json:"proof"`
	Log       string   `json:"log"`
	Witnesses []string `json:"witnesses"`
}

type proofResult struct {
	OK       bool     `json:"ok"`
	Error    string   `json:"error,omitempty"`
	Index    int64    `json:"index"`
	Size     int64    `json:"size"`
	Cosigned []string `json:"cosigned"`
}

func proofs(in io.Reader, out io.Writer) error {
	var doc struct {
		Items []proofItem `json:"items"`
	}
	if err := json.NewDecoder(in).Decode(&doc); err != nil {
		return err
	}
	results := make([]proofResult, 0, len(doc.Items))
	for _, item := range doc.Items {
		r := proofResult{Cosigned: []string{}}
		if err := proofOne(item, &r); err != nil {
			r.Error = err.Error()
		} else {
			r.OK = true
		}
		results = append(results, r)
	}
	return json.NewEncoder(out).Encode(results)
}

func proofOne(item proofItem, r *proofResult) error {
	head, checkpoint, found := strings.Cut(item.Proof, "\n\n")
	if !found {
		return errors.New("no empty line before the checkpoint")
	}
	lines := strings.Split(head, "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" {
		return errors.New("not a c2sp.org/tlog-proof@v1")
	}
	lines = lines[1:]
	var extra []byte
	if len(lines) > 0 && strings.HasPrefix(lines[0], "extra ") {
		var err error
		if extra, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[0], "extra ")); err != nil {
			return err
		}
		lines = lines[1:]
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "index ") {
		return errors.New("no index line")
	}
	index, err := strconv.ParseInt(strings.TrimPrefix(lines[0], "index "), 10, 64)
	if err != nil {
		return err
	}
	r.Index = index
	var path tlog.RecordProof
	for _, line := range lines[1:] {
		raw, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(raw) != tlog.HashSize {
			return errors.New("a proof line is not a base64 hash")
		}
		var h tlog.Hash
		copy(h[:], raw)
		path = append(path, h)
	}
	logKey, err := note.NewVerifier(item.Log)
	if err != nil {
		return err
	}
	known := []note.Verifier{logKey}
	for _, w := range item.Witnesses {
		v, err := parseCosignerKey(w)
		if err != nil {
			return err
		}
		known = append(known, v)
	}
	n, err := note.Open([]byte(checkpoint), note.VerifierList(known...))
	if err != nil {
		return err
	}
	for _, sig := range n.Sigs {
		if sig.Name != logKey.Name() || sig.Hash != logKey.KeyHash() {
			r.Cosigned = append(r.Cosigned, sig.Name)
		}
	}
	body := strings.Split(n.Text, "\n")
	if len(body) < 4 {
		return errors.New("the checkpoint has no size and root")
	}
	size, err := strconv.ParseInt(body[1], 10, 64)
	if err != nil {
		return err
	}
	r.Size = size
	rawRoot, err := base64.StdEncoding.DecodeString(body[2])
	if err != nil || len(rawRoot) != tlog.HashSize {
		return errors.New("the checkpoint's root is not a base64 hash")
	}
	var root tlog.Hash
	copy(root[:], rawRoot)
	return tlog.CheckRecord(path, size, root, index, tlog.RecordHash(extra))
}
