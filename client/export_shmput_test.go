package client

// SetStagedHook makes c call fn with each chunk of a same-host put right after it was copied
// into its staging slot, before the worker is asked to take it (tests spoil staged bytes or
// end the client there). Set it before c's first put.
func SetStagedHook(c *Client, fn func(slot []byte)) { c.stage.staged = fn }
