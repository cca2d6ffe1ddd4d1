// A schema-less native verifier of a KernelIndex bundle: the anchor of the offline-verify
// figure (issue 36). It does the least any verifier must do per event and nothing else:
// read the line, parse its JSON, base64-decode the DSSE payload and check the Ed25519
// signature over the DSSE pre-authentication encoding with the key the trust root or an
// earlier key event names. No schemas, no rules, no inclusion proofs, no checkpoint.
//
//	go_verify BUNDLE [WORKERS]   # prints one JSON line: events, seconds, eventsPerSecond
//
// With WORKERS > 1 the lines are read and key events handled in order on one goroutine
// (a key must be known before the events it signs), and the other events' parse + verify
// is spread over WORKERS goroutines.
package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

type signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

type envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []signature `json:"signatures"`
}

type record struct {
	Type      string          `json:"type"`
	Topic     string          `json:"topic"`
	Envelope  envelope        `json:"envelope"`
	TrustRoot json.RawMessage `json:"trustRoot"`
}

type key struct {
	KeyID     string `json:"keyId"`
	PublicKey string `json:"publicKey"`
}

type trustRoot struct {
	AdminKeys []key `json:"adminKeys"`
}

type keyStatement struct {
	Predicate key `json:"predicate"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go_verify: "+format+"\n", args...)
	os.Exit(1)
}

func pae(payloadType string, payload []byte) []byte {
	head := "DSSEv1 " + strconv.Itoa(len(payloadType)) + " " + payloadType + " " +
		strconv.Itoa(len(payload)) + " "
	return append([]byte(head), payload...)
}

func learn(keys map[string]ed25519.PublicKey, k key) {
	raw, err := base64.StdEncoding.DecodeString(k.PublicKey)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		fail("bad public key %q", k.KeyID)
	}
	keys[k.KeyID] = ed25519.PublicKey(raw)
}

// verify parses one event line and checks its signature.
func verify(line []byte, keys map[string]ed25519.PublicKey) {
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		fail("bad line: %v", err)
	}
	if r.Type != "event" {
		return
	}
	payload, err := base64.StdEncoding.DecodeString(r.Envelope.Payload)
	if err != nil || len(r.Envelope.Signatures) == 0 {
		fail("bad envelope")
	}
	s := r.Envelope.Signatures[0]
	pub, ok := keys[s.KeyID]
	if !ok {
		fail("unknown key %q", s.KeyID)
	}
	sig, err := base64.StdEncoding.DecodeString(s.Sig)
	if err != nil || !ed25519.Verify(pub, pae(r.Envelope.PayloadType, payload), sig) {
		fail("bad signature")
	}
}

// lineType is a record's "type" without parsing the whole line: the bundle writes it first.
func lineType(line []byte) string {
	var head struct {
		Type string `json:"type"`
	}
	prefix := []byte(`{"type":"`)
	if bytes.HasPrefix(line, prefix) {
		rest := line[len(prefix):]
		if end := bytes.IndexByte(rest, '"'); end >= 0 {
			return string(rest[:end])
		}
	}
	if err := json.Unmarshal(line, &head); err != nil {
		fail("bad line: %v", err)
	}
	return head.Type
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: go_verify BUNDLE [WORKERS]")
	}
	workers := 1
	if len(os.Args) > 2 {
		workers, _ = strconv.Atoi(os.Args[2])
	}
	runtime.GOMAXPROCS(workers)
	started := time.Now()
	file, err := os.Open(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	keys := map[string]ed25519.PublicKey{}
	events := 0
	var wg sync.WaitGroup
	spawn := func() chan []byte {
		lines := make(chan []byte, 1024)
		for i := 1; i < workers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for line := range lines {
					verify(line, keys)
				}
			}()
		}
		return lines
	}
	lines := spawn()
	for scanner.Scan() {
		line := scanner.Bytes()
		kind := lineType(line)
		if kind == "trustRoot" {
			var r record
			if err := json.Unmarshal(line, &r); err != nil {
				fail("bad trust root line: %v", err)
			}
			var root trustRoot
			if err := json.Unmarshal(r.TrustRoot, &root); err != nil {
				fail("bad trust root: %v", err)
			}
			for _, k := range root.AdminKeys {
				learn(keys, k)
			}
			continue
		}
		if kind != "event" {
			continue
		}
		events++
		if workers > 1 && !bytes.Contains(line, []byte("Principal.")) {
			lines <- append([]byte(nil), line...)
			continue
		}
		// A key event: in order, with no worker reading the map while it changes.
		if workers > 1 {
			close(lines)
			wg.Wait()
		}
		// The key is learnt before the signature is checked: a self-registration is
		// signed by the key it registers (the Python anchor learns keys in the same order).
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			fail("bad line: %v", err)
		}
		if strings.Contains(r.Topic, "Principal.") {
			payload, err := base64.StdEncoding.DecodeString(r.Envelope.Payload)
			if err != nil {
				fail("bad envelope")
			}
			var statement keyStatement
			if err := json.Unmarshal(payload, &statement); err != nil {
				fail("bad key statement: %v", err)
			}
			if statement.Predicate.PublicKey != "" {
				learn(keys, statement.Predicate)
			}
		}
		verify(line, keys)
		if workers > 1 {
			lines = spawn()
		}
	}
	if err := scanner.Err(); err != nil {
		fail("%v", err)
	}
	close(lines)
	wg.Wait()
	seconds := time.Since(started).Seconds()
	fmt.Printf("{\"events\": %d, \"workers\": %d, \"seconds\": %.6f, \"eventsPerSecond\": %.1f}\n",
		events, workers, seconds, float64(events)/seconds)
}
