package blobcache

import "sync"

// jobQueue is the FIFO between the writer and its flush workers, and between the workers and
// the commit goroutine. push never blocks: the writer pushes with writer.mu held, and the
// commit goroutine needs writer.mu to make progress, so a push that could wait for room would
// close a cycle (writer.mu -> full queue -> workers -> commit goroutine -> writer.mu).
//
// The queue is bounded all the same, by what may be in the pipeline at once (see the comment
// on the pipeline in writer.go): at most MaxInflightBatches+1 batches, one publication per
// PutFrom that has not returned, and one seal per segment that received a batch or a stream
// after the previous seal. Producers wait for room before they take writer.mu (openBatch waits
// for a free batch; putFromStream waits for its publication), never while holding it.
type jobQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	jobs   []*flushJob
	head   int
	closed bool
}

func newJobQueue() *jobQueue {
	q := &jobQueue{}
	q.cond.L = &q.mu
	return q
}

// push appends j. It never blocks (beyond q.mu, which is held only to move a pointer).
func (q *jobQueue) push(j *flushJob) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		panic("blobcache: push on a closed job queue")
	}
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
	q.cond.Signal()
}

// pop removes the oldest job, waiting for one; ok is false once the queue is closed and empty.
func (q *jobQueue) pop() (j *flushJob, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.jobs) {
		if q.closed {
			return nil, false
		}
		q.cond.Wait()
	}
	j = q.jobs[q.head]
	q.jobs[q.head] = nil
	q.head++
	if q.head == len(q.jobs) {
		// Empty: start again at the front, keeping the backing array.
		q.jobs, q.head = q.jobs[:0], 0
	}
	return j, true
}

// close makes pop return false once the jobs pushed before are taken. No push may follow.
func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}
