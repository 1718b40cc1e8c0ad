package gateway

import (
	"log/slog"
	"reflect"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/seal"
)

// The key ring seals what the HTTP front gives clients to give back
// (requestState). Its keys come from gateway.sealKeys or
// gateway.sealKeyFile; a reload that changes them swaps the ring's keys
// in place, so a value sealed by a key the new config still lists keeps
// opening, and one sealed by a key it dropped is refused as a forged one
// is. Without keys the ring has one random key, kept across reloads that
// configure none.

// randomKeyWarning is logged when the ring's key is random.
const randomKeyWarning = "no gateway.sealKeys: sealing with a random key; sealed values (requestState) will not survive a restart or be readable by another replica"

// sealKeys converts the config's keys; nil for none.
func sealKeys(cfg *config.Config) []seal.Key {
	var keys []seal.Key
	for _, k := range cfg.Gateway.SealKeys {
		keys = append(keys, seal.Key{ID: k.ID, Secret: k.Secret, Primary: k.Primary})
	}
	return keys
}

// newRing returns the ring of cfg's keys, or of a random key (with a
// warning) when it has none.
func newRing(cfg *config.Config, log *slog.Logger) (*seal.Ring, error) {
	keys := sealKeys(cfg)
	if len(keys) == 0 {
		log.Warn(randomKeyWarning)
		return seal.NewRandom(), nil
	}
	return seal.New(keys)
}

// checkSealKeys reports whether cfg's keys can make a ring (Validate has
// checked them already; this is the ring's own word).
func checkSealKeys(cfg *config.Config) error {
	if keys := sealKeys(cfg); len(keys) > 0 {
		_, err := seal.New(keys)
		return err
	}
	return nil
}

// setSealKeys gives g's ring the keys of cfg, if they differ from old's.
func (g *Gateway) setSealKeys(old, cfg *config.Config) {
	if reflect.DeepEqual(old.Gateway.SealKeys, cfg.Gateway.SealKeys) {
		return
	}
	keys := sealKeys(cfg)
	if len(keys) == 0 {
		g.ring.SetRandom()
		g.log.Warn(randomKeyWarning)
		return
	}
	if err := g.ring.SetKeys(keys); err != nil {
		g.log.Error("seal keys not changed", "err", err) // checked in prepare: not expected
		return
	}
	g.log.Info("seal keys changed", "keys", len(keys), "primary", g.ring.Primary())
}
