package raftmeta

import (
	"time"

	"github.com/hashicorp/raft"
)

// soloNudge is added to HeartbeatTimeout when raft starts, so that electIfSoleVoter can
// lower it back to the configured value: hashicorp/raft re-arms a follower's heartbeat timer
// at once when a reload shortens the timeout, and a follower that never heard from a leader
// then campaigns without waiting. 1 ms is far below any heartbeat timeout worth using.
const soloNudge = time.Millisecond

// electIfSoleVoter starts an election now when the latest configuration has exactly one
// voter and it is this node (standalone, a lone mooncake_master): there is nobody to hear
// from, so waiting a heartbeat timeout (1 s by default) only delays the first put. A
// single-voter candidate wins at once. In any other configuration it does nothing, and the
// 1 ms nudge stays (harmless).
func (n *Node) electIfSoleVoter() {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	if len(servers) != 1 || servers[0].ID != raft.ServerID(n.cfg.ID) || servers[0].Suffrage != raft.Voter {
		return
	}
	rc := n.raft.ReloadableConfig()
	if rc.HeartbeatTimeout <= n.cfg.HeartbeatTimeout {
		return // reloaded already
	}
	rc.HeartbeatTimeout, rc.ElectionTimeout = n.cfg.HeartbeatTimeout, n.cfg.ElectionTimeout
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("raftmeta: could not start the election of a single voter at once; it waits a heartbeat timeout", "err", err)
		return
	}
	n.log.Info("raftmeta: sole voter, electing itself at once")
}
