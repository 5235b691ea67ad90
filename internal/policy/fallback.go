package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// StockoutMetadataKey is the node metadata key that says what a recreate
// does when the zone has no capacity for it (Fallback).
const StockoutMetadataKey = "autoheal-stockout"

// Fallback modes.
const (
	FallbackWait  = "wait"  // retry in the home zone with the stockout back-off (the default)
	FallbackZones = "zones" // after StockoutZoneAfter stockouts, create in another listed zone of the region
	FallbackQueue = "queue" // a queued resource with the saved spec
)

// DefaultStockoutZoneAfter is Config.StockoutZoneAfter's default
// (AUTOHEAL_STOCKOUT_ZONE_AFTER).
const DefaultStockoutZoneAfter = 3

// DefaultQueueValidFor is how long a queued resource of `queue` waits
// for capacity unless `queue:VALID_FOR` says.
const DefaultQueueValidFor = 12 * time.Hour

// Fallback is what a node's metadata autoheal-stockout asks for:
// "wait" (or nothing), "zones:Z1,Z2,…" or "queue[:VALID_FOR]".
type Fallback struct {
	Mode     string
	Zones    []string      // zones: in the order listed
	ValidFor time.Duration // queue
}

var fallbackZoneRE = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+-[a-z]$`)

// ParseFallback reads a value of metadata autoheal-stockout.
func ParseFallback(v string) (Fallback, error) {
	v = strings.TrimSpace(v)
	mode, arg, hasArg := strings.Cut(v, ":")
	switch mode {
	case "", FallbackWait:
		if hasArg {
			return Fallback{}, fmt.Errorf("%s=%q: wait takes no argument", StockoutMetadataKey, v)
		}
		return Fallback{Mode: FallbackWait}, nil
	case FallbackZones:
		var zones []string
		for _, z := range strings.Split(arg, ",") {
			z = strings.TrimSpace(z)
			if !fallbackZoneRE.MatchString(z) {
				return Fallback{}, fmt.Errorf("%s=%q: %q is not a zone such as us-central2-a", StockoutMetadataKey, v, z)
			}
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
		return Fallback{Mode: FallbackZones, Zones: zones}, nil
	case FallbackQueue:
		f := Fallback{Mode: FallbackQueue, ValidFor: DefaultQueueValidFor}
		if hasArg {
			d, err := time.ParseDuration(arg)
			if err != nil || d <= 0 {
				return Fallback{}, fmt.Errorf("%s=%q: want queue:VALID_FOR, a positive duration such as 6h", StockoutMetadataKey, v)
			}
			f.ValidFor = d
		}
		return f, nil
	}
	return Fallback{}, fmt.Errorf("%s=%q: want wait, zones:Z1,Z2 or queue[:VALID_FOR]", StockoutMetadataKey, v)
}

// regionOf is a zone's region ("us-central2-b" → "us-central2").
func regionOf(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}

// pinnedToZone says why spec cannot be created in another zone ("" when
// it can): a zonal data disk or a reservation lives in its zone.
func pinnedToZone(spec *tpu.Node) string {
	switch {
	case spec == nil:
		return ""
	case len(spec.DataDisks) > 0:
		return "its spec attaches zonal data disks"
	case spec.SchedulingConfig != nil && spec.SchedulingConfig.Reserved:
		return "its spec creates it under a reservation"
	}
	return ""
}

// zoneFallbackRefusal says why a zones: fallback cannot be used for a node
// in home with spec ("" when it can): the spec pins it to its zone, or a
// listed zone is of another region or not one tpu-autoheal watches
// (Config.Zones, AUTOHEAL_ZONES).
func zoneFallbackRefusal(f Fallback, spec *tpu.Node, home string, cfg Config) string {
	if why := pinnedToZone(spec); why != "" {
		return "zones: refused: " + why + " (pinned to " + home + ")"
	}
	for _, z := range f.Zones {
		if regionOf(z) != regionOf(home) {
			return fmt.Sprintf("zones: refused: %s is in region %s, not the node's region %s (same region only)", z, regionOf(z), regionOf(home))
		}
		if !slices.Contains(cfg.Zones, z) {
			return fmt.Sprintf("zones: refused: %s is not in AUTOHEAL_ZONES (%s)", z, strings.Join(cfg.Zones, ","))
		}
	}
	return ""
}

// fallbackOf says what rec's node asked for on a stockout and what is done
// about it, in a record's words: the Fallback, and why it is not used
// ("" when it is).
func fallbackOf(rec Recovery, cfg Config) (Fallback, string) {
	v := ""
	if rec.Spec != nil {
		v = rec.Spec.Metadata[StockoutMetadataKey]
	}
	f, err := ParseFallback(v)
	if err != nil {
		return Fallback{Mode: FallbackWait}, err.Error() + ": waiting in the zone"
	}
	_, _, home, _, _ := ParseNodeName(rec.Node)
	switch f.Mode {
	case FallbackZones:
		if why := zoneFallbackRefusal(f, rec.Spec, home, cfg); why != "" {
			return Fallback{Mode: FallbackWait}, why + ": waiting in " + home
		}
		return f, ""
	case FallbackQueue:
		return Fallback{Mode: FallbackWait}, "queue: not carried out by this version: waiting in " + home
	}
	return f, ""
}

// describeFallback is what a stockout record says of the fallback.
func describeFallback(rec Recovery, cfg Config) string {
	f, why := fallbackOf(rec, cfg)
	switch {
	case why != "":
		return why
	case f.Mode == FallbackZones:
		_, _, home, _, _ := ParseNodeName(rec.Node)
		return fmt.Sprintf("zones:%s: accepted (another zone after %d stockouts; %d so far), but creating in another zone is not carried out by this version: waiting in %s",
			strings.Join(f.Zones, ","), stockoutZoneAfter(cfg), rec.Stockouts, home)
	}
	return FallbackWait
}

func stockoutZoneAfter(cfg Config) int {
	if cfg.StockoutZoneAfter > 0 {
		return cfg.StockoutZoneAfter
	}
	return DefaultStockoutZoneAfter
}
