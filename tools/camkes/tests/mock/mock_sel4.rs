//! A host stand-in for the `sel4` crate with the API the glue uses: `call`
//! runs the registered server in-process, so client and server glue can be
//! tested against each other. Message registers past MR3 live in one
//! shared array, as they would be copied between the two IPC buffers.

use std::cell::RefCell;

pub type Word = u64;
pub type CPtr = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageInfo {
    label: Word,
    length: Word,
}

impl MessageInfo {
    pub const fn new(label: Word, _caps_unwrapped: Word, _extra_caps: Word, length: Word) -> Self {
        MessageInfo { label, length }
    }
    pub const fn label(self) -> Word {
        self.label
    }
    pub const fn length(self) -> Word {
        self.length
    }
}

#[derive(Debug)]
pub struct Error;
pub type Result<T> = core::result::Result<T, Error>;

type Server = Box<dyn FnMut(Word, MessageInfo, [Word; 4]) -> (MessageInfo, [Word; 4])>;

thread_local! {
    static MSG: RefCell<[Word; 120]> = const { RefCell::new([0; 120]) };
    static SERVER: RefCell<Option<Server>> = RefCell::new(None);
    static PENDING: RefCell<Vec<CPtr>> = const { RefCell::new(Vec::new()) };
}

pub fn get_mr(i: usize) -> Word {
    MSG.with(|m| m.borrow()[i])
}

pub fn set_mr(i: usize, value: Word) {
    MSG.with(|m| m.borrow_mut()[i] = value)
}

/// Registers the function `call` delivers to.
pub fn serve(server: impl FnMut(Word, MessageInfo, [Word; 4]) -> (MessageInfo, [Word; 4]) + 'static) {
    SERVER.with(|s| *s.borrow_mut() = Some(Box::new(server)));
}

/// Delivers to the server with badge `dest + 100`; like the kernel, only
/// `length` registers arrive (the rest read as zero).
pub fn call(dest: CPtr, info: MessageInfo, mrs: [Word; 4]) -> (MessageInfo, [Word; 4]) {
    MSG.with(|m| m.borrow_mut()[(info.length() as usize).max(4)..].fill(0));
    let mut mrs = mrs;
    for (i, mr) in mrs.iter_mut().enumerate() {
        if i >= info.length() as usize {
            *mr = 0;
        }
    }
    let mut server = SERVER.with(|s| s.borrow_mut().take()).expect("no server registered");
    let reply = server(dest + 100, info, mrs);
    SERVER.with(|s| *s.borrow_mut() = Some(server));
    reply
}

pub fn recv(_src: CPtr) -> (MessageInfo, Word, [Word; 4]) {
    unimplemented!("the loopback test calls handle() directly")
}

pub fn reply_recv(_src: CPtr, _info: MessageInfo, _mrs: [Word; 4]) -> (MessageInfo, Word, [Word; 4]) {
    unimplemented!("the loopback test calls handle() directly")
}

pub fn signal(cap: CPtr) {
    PENDING.with(|p| p.borrow_mut().push(cap));
}

pub fn poll(cap: CPtr) -> Word {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let before = p.len();
        p.retain(|c| *c != cap);
        (before != p.len()) as Word
    })
}

pub fn wait(cap: CPtr) -> Word {
    let bits = poll(cap);
    assert!(bits != 0, "wait on slot {cap} would block forever");
    bits
}

pub fn irq_handler_ack(_cap: CPtr) -> Result<()> {
    Ok(())
}

pub fn x86_io_port_in8(_cap: CPtr, port: u16) -> Result<u8> {
    Ok(port as u8)
}
pub fn x86_io_port_in16(_cap: CPtr, port: u16) -> Result<u16> {
    Ok(port)
}
pub fn x86_io_port_in32(_cap: CPtr, port: u16) -> Result<u32> {
    Ok(port as u32)
}
pub fn x86_io_port_out8(_cap: CPtr, _port: u16, _value: u8) -> Result<()> {
    Ok(())
}
pub fn x86_io_port_out16(_cap: CPtr, _port: u16, _value: u16) -> Result<()> {
    Ok(())
}
pub fn x86_io_port_out32(_cap: CPtr, _port: u16, _value: u32) -> Result<()> {
    Ok(())
}
