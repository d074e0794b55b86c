package client

import "encoding/json"

// Status is the cluster status a master reports (its /api/v1/status JSON, also returned by the
// Status RPC). Fields the master adds later are kept in Raw; the CLI prints Raw for --json.
type Status struct {
	// Leader is the id of the leading master ("m2"); "" while there is none.
	Leader    string `json:"leader"`
	ClusterID string `json:"cluster_id,omitempty"`
	// Masters lists every master of the raft configuration.
	Masters []MasterStatus `json:"masters"`
	// Workers lists every registered worker (segment).
	Workers []WorkerStatus `json:"workers"`
	// Keys and Bytes count the committed objects and their logical size (one replica).
	Keys  int64 `json:"keys"`
	Bytes int64 `json:"bytes"`

	// Raw is the JSON document exactly as the master sent it.
	Raw json.RawMessage `json:"-"`
}

// MasterStatus is one master in Status.
type MasterStatus struct {
	ID          string `json:"id"`
	RPCAddress  string `json:"rpc_address"`
	RaftAddress string `json:"raft_address,omitempty"`
	Leader      bool   `json:"leader"`
	// AppliedIndex is the raft index the master has applied, when it reports one.
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	// Keys is the number of objects in this master's copy of the metadata, when it reports one.
	Keys int64 `json:"keys,omitempty"`
}

// WorkerStatus is one worker in Status.
type WorkerStatus struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	State    string `json:"state"`
	Used     int64  `json:"used"`
	Capacity int64  `json:"capacity"`
	Objects  int64  `json:"objects"`
	// Tiers breaks Used/Capacity/Objects down per tier ("dram", "nvme").
	Tiers []TierStatus `json:"tiers,omitempty"`
}

// TierStatus is one tier of a worker.
type TierStatus struct {
	Tier     string `json:"tier"`
	Used     int64  `json:"used"`
	Capacity int64  `json:"capacity"`
	Objects  int64  `json:"objects"`
}

// ParseStatus decodes a master's status JSON, keeping the raw bytes.
func ParseStatus(p []byte) (Status, error) {
	var s Status
	if err := json.Unmarshal(p, &s); err != nil {
		return Status{}, err
	}
	s.Raw = append(json.RawMessage(nil), p...)
	return s, nil
}
