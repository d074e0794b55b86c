package mooncakestore

import (
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func TestSetTenantID(t *testing.T) {
	s, _ := New()
	if err := s.SetTenantID("a b"); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("a bad tenant id: %v", err)
	}
	if err := s.SetTenantID("team-a"); err != nil || s.tenant != "team-a" {
		t.Fatalf("SetTenantID: %v (%q)", err, s.tenant)
	}
	s.Close()
	if err := s.SetTenantID("team-b"); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("after Close: %v", err)
	}
}
