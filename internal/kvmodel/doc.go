// Package kvmodel computes the KV-cache cost of a transformer model from its Hugging Face
// config.json: how many bytes one token's keys and values take, and so how many bytes a number
// of retained tokens should take in a KVCache store.
//
// # Formulas
//
// Multi-head and grouped-query attention (MHA, GQA, MQA) store one key and one value vector
// per KV head per layer:
//
//	bytes/token = ceil(num_key_value_heads / tp) x head_dim x 2 (K and V) x bytes per value x num_hidden_layers
//
// with head_dim = hidden_size / num_attention_heads unless the config gives head_dim, and
// num_key_value_heads = num_attention_heads when the config omits it (plain MHA). With tensor
// parallelism each of tp ranks stores its share of the KV heads (a head is never split).
//
// Multi-head latent attention (MLA: DeepSeek-V2, V3) stores one compressed latent per layer,
// shared by every head, plus the decoupled rotary key:
//
//	bytes/token = (kv_lora_rank + qk_rope_head_dim) x bytes per value x num_hidden_layers
//
// The latent is not split by heads, so every tensor-parallel rank stores all of it; tp does
// not divide it.
//
// A config that nests its language model under text_config (multimodal models) is read from
// there; torch_dtype may sit at either level. A missing or malformed field gives one error
// naming it.
//
// kvmodel is pure: no I/O, no clock. It imports nothing of the module; cmd/ and server/ use
// it (internal/ is the shared vocabulary every room may import).
package kvmodel
