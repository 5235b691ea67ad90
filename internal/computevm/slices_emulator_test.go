//go:build emulator

package computevm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/emulator"
)

// On Firestore, a slice document keeps its key, so that autoheal status can
// list the slices (the document id is the key's hash).
func TestOnFirestoreSlicesAreListedByKey(t *testing.T) {
	emulator.Require(t, emulator.Firestore)
	c, err := firestore.NewClientWithDatabase(context.Background(), "autoheal-test", "tpu-autoheal")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prefix := fmt.Sprintf("computevm-slices-%d-%d-", time.Now().UnixNano(), prefixSeq.Add(1))
	checkSlicesListed(t, computevm.NewFirestore(c, prefix))
}
