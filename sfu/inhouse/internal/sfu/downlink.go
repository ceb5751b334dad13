package sfu

import (
	"time"

	"sfubench/sfu/inhouse/internal/rtpfwd"
)

// The loss a subscriber's receiver reports say (in 256ths, RFC 3550's
// fraction lost) above which its link is taken as too narrow for the layer
// it gets, and below which as having room: the bounds of GCC's loss-based
// controller, 10 % and 2 %.
const (
	lossNarrow = 26
	lossClear  = 5
)

const (
	// reportLag: after the ceiling moves, the next reports still count
	// packets of the old layer (the switch waits for a keyframe, and a
	// browser reports about once a second).
	reportLag = 2 * time.Second
	// holdBase is how long the reports must stay clear before one layer up
	// is tried, and how long a try must stay clear to hold; each try that
	// fails doubles the wait for the next, up to holdMax.
	holdBase = 4 * time.Second
	holdMax  = 32 * time.Second
)

// downlink chooses the largest layer of one simulcast track a subscriber's
// link carries, from the loss its receiver reports say: down a layer while
// they say the link drops packets, up one when they have stayed clear a while.
// Loss is all it reads: the browser's queue overflows before it reports any,
// so a narrow link shows as a burst of loss, a layer down, and tries up that
// fail ever less often.
type downlink struct {
	ceiling uint8     // rtpfwd.Largest: none
	moved   time.Time // when the ceiling last moved
	clear   time.Time // since when the reports have been clear; zero: they are not
	hold    time.Duration
	trying  bool // the last move was a try up, not yet held
}

func newDownlink() *downlink {
	return &downlink{ceiling: rtpfwd.Largest, hold: holdBase}
}

// report takes one receiver report's fraction lost of the track, at now,
// while the subscriber receives layer of the track's layers 0..top. It
// returns the ceiling, and whether it moved.
func (l *downlink) report(lost uint8, now time.Time, layer, top uint8) (uint8, bool) {
	if now.Sub(l.moved) < reportLag {
		return l.ceiling, false
	}
	current := min(l.ceiling, layer)
	switch {
	case lost > lossNarrow:
		l.clear = time.Time{}
		if l.trying {
			l.hold = min(2*l.hold, holdMax)
			l.trying = false
		}
		if current == 0 {
			return l.ceiling, false
		}
		return l.move(current-1, now)
	case lost >= lossClear:
		l.clear = time.Time{}
		return l.ceiling, false
	}
	if l.clear.IsZero() {
		l.clear = now
	}
	if l.trying && now.Sub(l.moved) >= holdBase {
		l.trying, l.hold = false, holdBase
	}
	if l.ceiling == rtpfwd.Largest || now.Sub(l.clear) < l.hold {
		return l.ceiling, false
	}
	l.trying, l.clear = true, now
	if current+1 >= top {
		return l.move(rtpfwd.Largest, now)
	}
	return l.move(current+1, now)
}

func (l *downlink) move(ceiling uint8, now time.Time) (uint8, bool) {
	l.ceiling, l.moved = ceiling, now
	return ceiling, true
}
