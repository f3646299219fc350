//! Send-or-queue: what a component sends into a ring that may be full.
//!
//! A component that sends on a channel (an IO-Lite ring, a socket's send
//! buffer) cannot always wait for room: it runs an event loop and has other
//! peers to serve. What the ring refuses (back-pressure, not an error) must
//! then wait, in order, and go at the next opportunity, and what waits must
//! be bounded: a peer that stops taking messages may cost the sender a
//! known amount of memory, never all of it. [`Outbox`] is that queue:
//!
//! * [`Outbox::send`] sends at once when nothing waits and the ring takes
//!   it; otherwise what waits goes first and the message waits behind it.
//!   Nothing overtakes what is already queued.
//! * [`Outbox::drain`] sends what waits, in order, until the ring refuses
//!   one (which stays first): call it whenever room may have appeared (the
//!   peer signalled, before blocking).
//! * At most `cap` messages wait. A message that finds the queue full is
//!   handed back to the caller and counted ([`Outbox::refused`]); the
//!   caller decides what that costs (a dropped frame, a refused request),
//!   and reports it. Callers size `cap` so that it does not happen when
//!   the peer behaves, and stop producing (back-pressure of their own)
//!   before it does: see [`Outbox::room`].
//!
//! The ring is a closure (`FnMut(T) -> Result<(), T>`: `Err` hands the
//! message back unchanged when it did not fit), so the queue works the
//! same in front of a `ChannelTx`, a `Guard`ed one, or a TCP socket; a
//! closure may also take part of a message and hand back the rest, which
//! then stays first. A closure that meets a fault (the channel broke)
//! hands the message back and the caller [`Outbox::clear`]s the queue.

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
// A refused message is handed back by value (nothing is lost); an IO-Lite
// aggregate is a few hundred bytes, which is fine.
#![allow(clippy::result_large_err)]

extern crate alloc;

use alloc::collections::VecDeque;

/// A bounded, ordered queue of messages waiting for room in a ring (see
/// the crate docs).
#[derive(Debug)]
pub struct Outbox<T> {
    queue: VecDeque<T>,
    cap: usize,
    refused: u64,
    queued: u64,
    peak: usize,
}

impl<T> Outbox<T> {
    /// An empty queue that holds at most `cap` waiting messages. Its
    /// memory grows as messages wait (nothing is reserved up front).
    pub const fn new(cap: usize) -> Self {
        Self { queue: VecDeque::new(), cap, refused: 0, queued: 0, peak: 0 }
    }

    /// Sends `msg` through `ring` unless messages wait: then those go first
    /// ([`Outbox::drain`]), and `msg` goes only if they all did. A message
    /// the ring refuses waits. `Err(msg)`: the queue is full; `msg` is
    /// handed back and counted in [`Outbox::refused`].
    pub fn send(&mut self, msg: T, mut ring: impl FnMut(T) -> Result<(), T>) -> Result<(), T> {
        if !self.queue.is_empty() {
            self.drain(&mut ring);
        }
        if !self.queue.is_empty() {
            return self.push(msg);
        }
        match ring(msg) {
            Ok(()) => Ok(()),
            Err(msg) => self.push(msg),
        }
    }

    /// Queues `msg` behind what waits without trying the ring (a batch
    /// that is handed over later with [`Outbox::drain`]). `Err(msg)`: the
    /// queue is full (counted in [`Outbox::refused`]).
    pub fn push(&mut self, msg: T) -> Result<(), T> {
        if self.queue.len() >= self.cap {
            self.refused += 1;
            return Err(msg);
        }
        self.queue.push_back(msg);
        self.queued += 1;
        self.peak = self.peak.max(self.queue.len());
        Ok(())
    }

    /// Sends what waits through `ring`, oldest first, until the queue is
    /// empty or the ring refuses a message (which stays first). Returns the
    /// number of messages the ring took.
    pub fn drain(&mut self, mut ring: impl FnMut(T) -> Result<(), T>) -> usize {
        let mut sent = 0;
        while let Some(msg) = self.queue.pop_front() {
            if let Err(msg) = ring(msg) {
                self.queue.push_front(msg);
                break;
            }
            sent += 1;
        }
        sent
    }

    /// Drops every waiting message (the ring is gone for good); returns
    /// how many there were.
    pub fn clear(&mut self) -> usize {
        let n = self.queue.len();
        self.queue.clear();
        n
    }

    /// Gives the memory of an empty queue back (a queue per connection
    /// should not keep the peak of every connection that once waited).
    pub fn shrink(&mut self) {
        if self.queue.is_empty() && self.queue.capacity() > 8 {
            self.queue = VecDeque::new();
        }
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// The messages waiting, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.queue.iter()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// How many more messages may wait before one is refused.
    pub fn room(&self) -> usize {
        self.cap.saturating_sub(self.queue.len())
    }

    /// The bound given to [`Outbox::new`].
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Messages refused because the queue was full (handed back to the
    /// caller by [`Outbox::send`] or [`Outbox::push`]).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Messages that had to wait (queued instead of sent at once).
    pub fn queued(&self) -> u64 {
        self.queued
    }

    /// The most messages that waited at once.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests;
