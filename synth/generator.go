package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"sfubench/sfu/inhouse/client"
)

const (
	healthEvery = 500 * time.Millisecond // as a page's health records
	postTimeout = 5 * time.Second
)

// generator is one sfubench-synth process: its members, and its link to
// the engine, which it talks to as the pages do (docs/contracts.md): state,
// health, samples and frames posted to /collect, commands in the answers.
// It posts for all its members at once, one batch per half second, and a
// record of its own pacing error, which the client-bound rule reads.
type generator struct {
	id         string
	http       *http.Client
	driver     Driver
	driverName string
	apiOptions client.APIOptions
	clip       *clip
	fps        int

	mu       sync.Mutex
	token    string // the run's: every post to the engine carries it
	collect  string // the engine's /collect URL: a flag's, or the first join's when commands come over HTTP
	members  map[string]*member
	reported map[*member]string // the state last posted
	windows  map[int]*window
}

// window is a measurement the engine scheduled: n samples interval apart
// from at, by each member the command reached.
type window struct {
	users map[string]bool
}

type command struct {
	Cmd      string  `json:"cmd"`
	On       bool    `json:"on"`
	Phase    string  `json:"phase"`
	Window   int     `json:"window"`
	N        int     `json:"n"`
	Interval float64 `json:"interval"`
	At       float64 `json:"at"`
}

func (g *generator) add(m *member) {
	g.mu.Lock()
	if old := g.members[m.user]; old != nil {
		go old.close()
	}
	g.members[m.user] = m
	g.mu.Unlock()
	go m.join(g)
}

func (g *generator) remove(user string) {
	g.mu.Lock()
	m := g.members[user]
	delete(g.members, user)
	g.mu.Unlock()
	if m != nil {
		m.close()
	}
}

func (g *generator) setCollect(url string) {
	g.mu.Lock()
	g.collect = url
	g.mu.Unlock()
}

func (g *generator) collectURL() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.collect
}

func (g *generator) snapshot() []*member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	return out
}

// report posts every half second until stop closes.
func (g *generator) report(stop <-chan struct{}) {
	t := time.NewTicker(healthEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		collect := g.collectURL()
		if collect == "" {
			continue // no run has told this generator where its engine is yet
		}
		var records []record
		members := g.snapshot()
		for _, m := range members {
			state, reason := m.status()
			g.mu.Lock()
			changed := g.reported[m] != state
			g.reported[m] = state
			g.mu.Unlock()
			if changed {
				records = append(records, record{"type": "state", "user": m.user, "state": state, "reason": reason})
			}
			if f := m.frames(); len(f) > 0 {
				records = append(records, record{"type": "frames", "user": m.user, "series": f})
			}
			records = append(records, record{"type": "health", "user": m.user, "state": state})
		}
		records = append(records, record{"type": "generator", "id": g.id, "pacing_us": pacing.take(),
			"participants": len(members)})
		commands, err := g.post(collect, records)
		if err != nil {
			fmt.Fprintf(os.Stderr, "synth: posting to the engine: %v\n", err)
			continue
		}
		for user, cmds := range commands {
			for _, c := range cmds {
				g.command(user, c)
			}
		}
	}
}

func (g *generator) post(collect string, records []record) (map[string][]command, error) {
	var err error
	body := appendJSON(nil, record{"type": "batch", "records": records}, &err)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, collect, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(tokenHeader, g.token)
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("the engine answered %s", resp.Status)
	}
	var answer map[string][]command
	return answer, json.NewDecoder(resp.Body).Decode(&answer)
}

func (g *generator) command(user string, c command) {
	g.mu.Lock()
	m := g.members[user]
	g.mu.Unlock()
	if m == nil {
		return
	}
	switch c.Cmd {
	case "follow":
		m.follow(c.On)
	case "measure":
		if c.N < 1 || c.Interval <= 0 {
			return
		}
		g.mu.Lock()
		w := g.windows[c.Window]
		if w == nil {
			w = &window{users: map[string]bool{}}
			g.windows[c.Window] = w
			go g.measure(c, w)
		}
		w.users[user] = true
		g.mu.Unlock()
	}
	// capture is for pages that can encode a picture: a synthetic
	// participant decodes nothing, and the engine sends it none.
}

// measure takes the window's samples at their times. A sample whose time
// passed while the generator was held up is skipped, not taken late, as a
// page does.
func (g *generator) measure(c command, w *window) {
	defer func() {
		g.mu.Lock()
		delete(g.windows, c.Window)
		g.mu.Unlock()
	}()
	interval := time.Duration(c.Interval * float64(time.Second))
	start := time.UnixMicro(int64(c.At * 1000))
	for i := range c.N {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		if time.Since(due) > interval/2 {
			continue
		}
		began := time.Now()
		g.mu.Lock()
		var ms []*member
		for u := range w.users {
			if m := g.members[u]; m != nil {
				ms = append(ms, m)
			}
		}
		g.mu.Unlock()
		var records []record
		for _, m := range ms {
			s := m.samples(began)
			if s == nil {
				continue
			}
			records = append(records, record{"type": "samples", "user": m.user, "window": c.Window, "i": i,
				"took_ms": float64(time.Since(began).Microseconds()) / 1000, "samples": s})
		}
		if len(records) == 0 {
			continue
		}
		if _, err := g.post(g.collectURL(), records); err != nil {
			fmt.Fprintf(os.Stderr, "synth: posting samples of window %d: %v\n", c.Window, err)
		}
	}
}

func (g *generator) closeAll() {
	var wg sync.WaitGroup
	for _, m := range g.snapshot() {
		wg.Go(func() { g.remove(m.user) })
	}
	wg.Wait()
}
