// Command sfubench-netem is the lab's link emulator: this kernel has no
// netem, so the link between the clients and the SFU runs through a
// namespace of its own where this process bridges two veth ends in user
// space, frame by frame (AF_PACKET), applying a network profile to each
// direction: loss (random or in bursts), a rate with a bounded queue, and
// delay with jitter (which reorders frames, as netem's does).
//
//	sfubench-netem -a IF -b IF -up PROFILE -down PROFILE [-stats FILE]
//	               [-group-ip IP -group-up PROFILE -group-down PROFILE]
//
// "up" is what enters on -a and leaves on -b (the clients' side to the
// SFU's); "down" the other way. PROFILE is JSON: {"delay_ms", "jitter_ms",
// "loss_pct", "burst", "rate_kbps", "queue_ms"}. The -group profiles apply
// instead to the client whose IPv4 address is -group-ip (a group of clients
// on an address of their own), each direction with a rate of its own.
// Counters go to FILE as one JSON line per second and at exit. Each line on
// stdin, {"up": PROFILE, "down": PROFILE}, replaces the profiles (not the
// group's) from then on: a load shape degrading the network mid-run.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sfubench-netem:", err)
		os.Exit(1)
	}
}

func run() error {
	a := flag.String("a", "", "the clients' side interface")
	b := flag.String("b", "", "the SFU's side interface")
	up := flag.String("up", "{}", "the profile from -a to -b (JSON)")
	down := flag.String("down", "{}", "the profile from -b to -a (JSON)")
	stats := flag.String("stats", "", "write counters here, a JSON line each second")
	groupIP := flag.String("group-ip", "", "a client address whose frames take the -group profiles")
	groupUp := flag.String("group-up", "{}", "the profile from -group-ip to -b (JSON)")
	groupDown := flag.String("group-down", "{}", "the profile from -b to -group-ip (JSON)")
	flag.Parse()
	if *a == "" || *b == "" {
		return fmt.Errorf("-a and -b name the two interfaces to bridge")
	}
	var pu, pd, gu, gd Profile
	for _, p := range []struct {
		s   string
		dst *Profile
	}{{*up, &pu}, {*down, &pd}, {*groupUp, &gu}, {*groupDown, &gd}} {
		if err := json.Unmarshal([]byte(p.s), p.dst); err != nil {
			return fmt.Errorf("profile %s: %w", p.s, err)
		}
		if err := p.dst.Validate(); err != nil {
			return err
		}
	}
	pa, err := openPort(*a)
	if err != nil {
		return err
	}
	pb, err := openPort(*b)
	if err != nil {
		return err
	}
	seed := time.Now().UnixNano()
	dirs := []*Direction{{Name: "up", All: NewLink("up", pu, seed), at: 26},
		{Name: "down", All: NewLink("down", pd, seed+1), at: 30}}
	if *groupIP != "" {
		ip := net.ParseIP(*groupIP).To4()
		if ip == nil {
			return fmt.Errorf("-group-ip %q is no IPv4 address", *groupIP)
		}
		for i, p := range []Profile{gu, gd} {
			dirs[i].Group, dirs[i].IP = NewLink("group_"+dirs[i].Name, p, seed+2+int64(i)), [4]byte(ip)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, ends := range [][2]*port{{pa, pb}, {pb, pa}} {
		d, in, out := dirs[i], ends[0], ends[1]
		q := make(chan packet, queueCap)
		wg.Go(func() { errs <- d.receive(in, q) })
		wg.Go(func() { errs <- d.send(out, q) })
	}
	changes := make(chan [2]Profile)
	go readChanges(os.Stdin, changes)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	write := func() {
		if *stats == "" {
			return
		}
		counters := map[string]Counters{}
		for _, d := range dirs {
			counters[d.Name] = d.All.Counters()
			if d.Group != nil {
				counters["group_"+d.Name] = d.Group.Counters()
			}
		}
		line, _ := json.Marshal(counters)
		tmp := *stats + ".tmp"
		if os.WriteFile(tmp, append(line, '\n'), 0o644) == nil {
			_ = os.Rename(tmp, *stats)
		}
	}
	for {
		select {
		case <-tick.C:
			write()
		case p := <-changes:
			dirs[0].All.Set(p[0])
			dirs[1].All.Set(p[1])
			write() // the counters at the change: what came before it is told apart from after
		case <-sig:
			write()
			return nil
		case err := <-errs:
			write()
			return err
		}
	}
}

// readChanges passes on each valid line of r as the new profiles; a bad
// line is reported and ignored, the link keeps what it had.
func readChanges(r io.Reader, out chan<- [2]Profile) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var c struct{ Up, Down Profile }
		err := json.Unmarshal(sc.Bytes(), &c)
		if err == nil {
			err = errors.Join(c.Up.Validate(), c.Down.Validate())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "sfubench-netem: ignoring %q: %v\n", sc.Text(), err)
			continue
		}
		out <- [2]Profile{c.Up, c.Down}
	}
}
