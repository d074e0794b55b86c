package main

import (
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/spf13/pflag"
)

// kvEventFlags are Mooncake's master --enable_kv_events and kv_events_* flags (the ones with
// an effect; kv_events_tenant_id and kv_events_queue_capacity are accepted from the table in
// compat_flags.go). They are also keys of a --config_path file, as in Mooncake.
type kvEventFlags struct {
	enabled, emitKey, emitLegacy bool
	endpoint, backend, model     string
	lora, salt                   string
	blockSize, dpRank            uint32
}

func (f *kvEventFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "enable_kv_events", false, "publish KV events (object stored/removed/cleared) over ZMQ from the leader, in Mooncake's format (docs/operations.md)")
	fs.StringVar(&f.endpoint, "kv_events_bind_endpoint", "", "the ZMQ PUB address each master binds, e.g. tcp://0.0.0.0:5557 (required with --enable_kv_events)")
	fs.StringVar(&f.backend, "kv_events_backend_id", "", "the backend name written into every event (required with --enable_kv_events)")
	fs.StringVar(&f.model, "kv_events_model_name", "", "the model written into events of objects whose put named none")
	fs.Uint32Var(&f.blockSize, "kv_events_block_size", 0, "tokens per block written into events (0 sends nil)")
	fs.StringVar(&f.lora, "kv_events_lora_name", "", "LoRA name written into events (empty sends nil)")
	fs.StringVar(&f.salt, "kv_events_additional_salt", "", "salt written into events (empty sends nil)")
	fs.Uint32Var(&f.dpRank, "kv_events_dp_rank", 0, "data-parallel rank written into every event and batch")
	fs.BoolVar(&f.emitKey, "kv_events_emit_object_key", true, "add object_key to object events; false skips object events (as Mooncake does)")
	fs.BoolVar(&f.emitLegacy, "kv_events_emit_legacy_compat", true, "add the legacy vLLM fields type, block_hashes and parent_block_hash")
}

// config checks the flags and returns the server's configuration.
func (f *kvEventFlags) config() (master.KVEventsConfig, error) {
	c := master.KVEventsConfig{Enabled: f.enabled, BindEndpoint: f.endpoint, BackendID: f.backend, ModelName: f.model,
		BlockSize: f.blockSize, LoraName: f.lora, AdditionalSalt: f.salt, DPRank: f.dpRank,
		EmitObjectKey: f.emitKey, EmitLegacyCompat: f.emitLegacy}
	if err := c.Validate(); err != nil {
		return c, usagef("%v", err)
	}
	return c, nil
}
