package main

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

type checkItem struct {
	Note      string   `json:"note"`
	Log       string   `json:"log"`
	Witnesses []string `json:"witnesses"`
}

type checkResult struct {
	OK         bool              `json:"ok"`
	Error      string            `json:"error,omitempty"`
	Origin     string            `json:"origin,omitempty"`
	Size       int64             `json:"size,omitempty"`
	Cosigned   []string          `json:"cosigned"`
	Timestamps map[string]uint64 `json:"timestamps"`
}

func check(in io.Reader, out io.Writer) error {
	var doc struct {
		Items []checkItem `json:"items"`
	}
	if err := json.NewDecoder(in).Decode(&doc); err != nil {
		return err
	}
	results := make([]checkResult, 0, len(doc.Items))
	for _, item := range doc.Items {
		results = append(results, checkOne(item))
	}
	return json.NewEncoder(out).Encode(results)
}

func checkOne(item checkItem) checkResult {
	r := checkResult{Cosigned: []string{}, Timestamps: map[string]uint64{}}
	logKey, err := note.NewVerifier(item.Log)
	if err != nil {
		r.Error = "log key: " + err.Error()
		return r
	}
	known := []note.Verifier{logKey}
	witnesses := map[string]bool{}
	for _, w := range item.Witnesses {
		v, err := parseCosignerKey(w)
		if err != nil {
			r.Error = "witness key: " + err.Error()
			return r
		}
		known = append(known, v)
		witnesses[v.name+"/"+strconv.FormatUint(uint64(v.hash), 16)] = true
	}
	n, err := note.Open([]byte(item.Note), note.VerifierList(known...))
	if err != nil {
		r.Error = err.Error()
		return r
	}
	logSigned := false
	for _, sig := range n.Sigs {
		key := sig.Name + "/" + strconv.FormatUint(uint64(sig.Hash), 16)
		if witnesses[key] {
			r.Cosigned = append(r.Cosigned, sig.Name)
			r.Timestamps[sig.Name] = cosignatureTime(sig.Base64)
		} else if sig.Name == logKey.Name() && sig.Hash == logKey.KeyHash() {
			logSigned = true
		}
	}
	lines := strings.SplitN(n.Text, "\n", 3)
	if len(lines) >= 2 {
		r.Origin = lines[0]
		r.Size, _ = strconv.ParseInt(lines[1], 10, 64)
	}
	if !logSigned {
		r.Error = "no signature by the log key"
		return r
	}
	r.OK = true
	return r
}
