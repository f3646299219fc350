use super::*;
use alloc::string::ToString;
use alloc::vec;

/// A small but complete system: an RPC pair, a shared dataport read-only on
/// one side, and a driver with MMIO, an IRQ and I/O ports.
fn sample() -> SystemSpec {
    let mut spec = SystemSpec::new();
    let ep = spec.add_object("client_server", ObjectKind::Endpoint);
    let frames = spec.add_object("frame_conn", ObjectKind::Frames { size: 2 * PAGE_SIZE });
    let regs = spec.add_object("uart_mmio", ObjectKind::DeviceFrames { paddr: 0xFED0_0000, size: PAGE_SIZE });
    let ntfn = spec.add_object("uart_irq", ObjectKind::Notification);
    let irq = spec.add_object(
        "uart_irq.irq",
        ObjectKind::IoApicIrq(IoApicIrq {
            ioapic: 0,
            pin: 4,
            level_triggered: false,
            active_low: false,
            vector: 20,
            notification: ntfn,
            badge: 1,
        }),
    );
    let ports = spec.add_object("uart_io", ObjectKind::IoPorts { first: 0x3F8, last: 0x3FF });
    let base = |name: &str| Component {
        name: name.to_string(),
        component_type: "T".to_string(),
        elf: "t".to_string(),
        control: true,
        priority: DEFAULT_PRIORITY,
        max_priority: DEFAULT_PRIORITY,
        stack_size: DEFAULT_STACK_SIZE,
        restartable: false,
        fault_injection: false,
        hang_cpu_ms: 0,
        may_restart: vec![],
        events: false,
        events_notification: None,
        confirm_death_ms: DEFAULT_CONFIRM_DEATH_MS,
        untrusted: false,
        log_ring: None,
        log_server: None,
        restart_policy: RestartPolicy::default(),
        cnode_size_bits: DEFAULT_CNODE_SIZE_BITS,
        first_free_slot: 1,
        pci_match: None,
        caps: vec![],
        mappings: vec![],
        interfaces: vec![],
    };
    let mut client = base("client");
    // The client may have the (restartable) server restarted.
    client.may_restart = vec![1];
    client.first_free_slot = 2;
    client.caps.push(Cap { slot: 1, object: ep, rights: Rights::CALL, badge: 1 });
    client.mappings.push(Mapping { object: frames, vaddr: DATAPORT_BASE, access: Access::ReadWrite, cached: true });
    client.interfaces.push(Interface { name: "kv".to_string(), binding: Binding::RpcClient { slot: 1 } });
    client.interfaces.push(Interface {
        name: "frame".to_string(),
        binding: Binding::Dataport { vaddr: DATAPORT_BASE, size: 2 * PAGE_SIZE, access: Access::ReadWrite },
    });
    let mut server = base("server");
    server.restartable = true;
    server.first_free_slot = 2;
    server.caps.push(Cap { slot: 1, object: ep, rights: Rights::READ, badge: 0 });
    server.mappings.push(Mapping { object: frames, vaddr: DATAPORT_BASE, access: Access::ReadOnly, cached: true });
    server.interfaces.push(Interface { name: "kv".to_string(), binding: Binding::RpcServer { slot: 1 } });
    server.interfaces.push(Interface {
        name: "frame".to_string(),
        binding: Binding::Dataport { vaddr: DATAPORT_BASE, size: 2 * PAGE_SIZE, access: Access::ReadOnly },
    });
    let mut driver = base("driver");
    driver.first_free_slot = 4;
    driver.caps.push(Cap { slot: 1, object: ntfn, rights: Rights::READ, badge: 0 });
    driver.caps.push(Cap { slot: 2, object: ports, rights: Rights::NONE, badge: 0 });
    driver.caps.push(Cap { slot: 3, object: irq, rights: Rights::NONE, badge: 0 });
    driver.mappings.push(Mapping { object: regs, vaddr: DATAPORT_BASE, access: Access::ReadWrite, cached: false });
    driver.interfaces.push(Interface {
        name: "regs".to_string(),
        binding: Binding::Dataport { vaddr: DATAPORT_BASE, size: PAGE_SIZE, access: Access::ReadWrite },
    });
    driver.interfaces.push(Interface {
        name: "irq".to_string(),
        binding: Binding::InterruptConsumer { slot: 1, irq_handler_slot: 3 },
    });
    driver.interfaces.push(Interface { name: "ports".to_string(), binding: Binding::IoPortUser { slot: 2 } });
    spec.components = vec![client, server, driver];
    spec
}

#[test]
fn sample_is_valid() {
    assert_eq!(sample().validate(), Ok(()));
}

#[test]
fn encode_decode_roundtrip() {
    let spec = sample();
    let bytes = spec.encode().unwrap();
    assert!(bytes.starts_with(&MAGIC));
    assert_eq!(SystemSpec::decode(&bytes).unwrap(), spec);
}

#[test]
fn decode_rejects_foreign_bytes() {
    assert_eq!(SystemSpec::decode(b"not a spec at all"), Err(DecodeError::BadMagic));
    let mut bytes = sample().encode().unwrap();
    bytes[MAGIC.len()] = 99;
    assert_eq!(SystemSpec::decode(&bytes), Err(DecodeError::WrongVersion { found: 99 }));
    let bytes = sample().encode().unwrap();
    assert!(matches!(SystemSpec::decode(&bytes[..bytes.len() - 3]), Err(DecodeError::Malformed(_))));
}

#[test]
fn decode_validates() {
    let mut spec = sample();
    spec.components[0].caps[0].slot = 0;
    let bytes = spec.encode().unwrap();
    let err = SystemSpec::decode(&bytes).unwrap_err();
    assert!(matches!(err, DecodeError::Invalid(SpecError::BadSlot { .. })), "{err}");
}

fn invalid(change: impl FnOnce(&mut SystemSpec)) -> String {
    let mut spec = sample();
    change(&mut spec);
    spec.validate().unwrap_err().to_string()
}

#[test]
fn rejects_unaligned_frames() {
    let msg = invalid(|s| s.objects[1].kind = ObjectKind::Frames { size: 100 });
    assert!(msg.contains("frame_conn") && msg.contains("multiple of 0x1000"), "{msg}");
    let msg = invalid(|s| s.objects[2].kind = ObjectKind::DeviceFrames { paddr: 0xFED0_0010, size: PAGE_SIZE });
    assert!(msg.contains("not page-aligned"), "{msg}");
}

#[test]
fn rejects_bad_irqs() {
    let msg = invalid(|s| {
        if let ObjectKind::IoApicIrq(irq) = &mut s.objects[4].kind {
            irq.vector = 108;
        }
    });
    assert!(msg.contains("vector must be 0..=107"), "{msg}");
    let msg = invalid(|s| {
        if let ObjectKind::IoApicIrq(irq) = &mut s.objects[4].kind {
            irq.notification = ObjectId(0);
        }
    });
    assert!(msg.contains("must signal a notification"), "{msg}");
    let msg = invalid(|s| {
        let copy = s.objects[4].clone();
        s.objects.push(copy);
    });
    assert!(msg.contains("vector 20 is used twice"), "{msg}");
}

#[test]
fn rejects_overlapping_devices() {
    let msg = invalid(|s| {
        s.add_object("other_io", ObjectKind::IoPorts { first: 0x3FF, last: 0x400 });
    });
    assert!(msg.contains("'uart_io' and 'other_io' overlap"), "{msg}");
    let msg = invalid(|s| {
        s.add_object("other_io", ObjectKind::IoPorts { first: 0x400, last: 0x3FF });
    });
    assert!(msg.contains("range is empty"), "{msg}");
    let msg = invalid(|s| {
        s.add_object("other_mmio", ObjectKind::DeviceFrames { paddr: 0xFED0_0000, size: PAGE_SIZE });
    });
    assert!(msg.contains("device frames of 'uart_mmio' and 'other_mmio' overlap"), "{msg}");
}

#[test]
fn rejects_slot_problems() {
    let msg = invalid(|s| s.components[2].caps[1].slot = 1);
    assert!(msg.contains("slot 1 holds two capabilities"), "{msg}");
    let msg = invalid(|s| s.components[0].caps[0].slot = 7);
    assert!(msg.contains("past first_free_slot"), "{msg}");
    let msg = invalid(|s| s.components[0].caps[0].object = ObjectId(99));
    assert!(msg.contains("object #99 which does not exist"), "{msg}");
    let msg = invalid(|s| s.components[0].caps[0].object = ObjectId(1));
    assert!(msg.contains("frames are mapped"), "{msg}");
    let msg = invalid(|s| s.components[0].cnode_size_bits = 2);
    assert!(msg.contains("cnode_size_bits"), "{msg}");
}

#[test]
fn rejects_mapping_problems() {
    let msg = invalid(|s| s.components[0].mappings[0].vaddr = DATAPORT_BASE + 1);
    assert!(msg.contains("not page-aligned"), "{msg}");
    let msg = invalid(|s| s.components[0].mappings[0].object = ObjectId(0));
    assert!(msg.contains("only frames can be mapped"), "{msg}");
    let msg = invalid(|s| {
        let extra = Mapping {
            object: ObjectId(1),
            vaddr: DATAPORT_BASE + 2 * PAGE_SIZE,
            access: Access::ReadOnly,
            cached: true,
        };
        s.components[0].mappings.push(extra);
    });
    assert!(msg.contains("overlaps another (or its guard page)"), "{msg}");
    let msg = invalid(|s| s.components[0].mappings[0].vaddr = USER_TOP - PAGE_SIZE);
    assert!(msg.contains("past the user address space"), "{msg}");
}

#[test]
fn large_dataports_use_large_frames_at_aligned_addresses() {
    assert_eq!(frame_size(PAGE_SIZE), PAGE_SIZE);
    assert_eq!(frame_size(3 * LARGE_PAGE_SIZE / 2), PAGE_SIZE);
    assert_eq!(frame_size(LARGE_PAGE_SIZE), LARGE_PAGE_SIZE);
    assert_eq!(frame_size(4 * LARGE_PAGE_SIZE), LARGE_PAGE_SIZE);
    assert_eq!(frame_size(0), PAGE_SIZE);
    let msg = invalid(|s| {
        let object = s.components[0].mappings[0].object;
        s.objects[object.0 as usize].kind = ObjectKind::Frames { size: LARGE_PAGE_SIZE };
        s.components[0].mappings[0].vaddr = DATAPORT_BASE + PAGE_SIZE;
    });
    assert!(msg.contains("must be 2 MiB-aligned"), "{msg}");
}

#[test]
fn rejects_bindings_that_disagree() {
    let msg = invalid(|s| {
        s.components[1].interfaces[1].binding =
            Binding::Dataport { vaddr: DATAPORT_BASE, size: 2 * PAGE_SIZE, access: Access::ReadWrite }
    });
    assert!(msg.contains("'server', interface 'frame'") && msg.contains("rights differ"), "{msg}");
    let msg = invalid(|s| s.components[0].caps[0].rights = Rights::READ);
    assert!(msg.contains("interface 'kv'") && msg.contains("wrong object kind or rights"), "{msg}");
    let msg = invalid(|s| {
        s.components[2].interfaces[1].binding = Binding::InterruptConsumer { slot: 1, irq_handler_slot: 2 }
    });
    assert!(msg.contains("interface 'irq'"), "{msg}");
    let msg = invalid(|s| s.components[2].mappings[0].access = Access::ReadOnly);
    assert!(msg.contains("rights differ"), "{msg}");
}

#[test]
fn rejects_duplicate_components() {
    let msg = invalid(|s| {
        let copy = s.components[0].clone();
        s.components.push(copy);
    });
    assert_eq!(msg, "component 'client' appears twice");
}

#[test]
fn restart_grants_name_other_restartable_components_once() {
    let reason = |spec: &SystemSpec| match spec.validate() {
        Err(SpecError::BadRestartGrant { component, target, reason }) => (component, target, reason),
        other => panic!("expected a bad restart grant, got {other:?}"),
    };
    let mut s = sample();
    s.components[0].may_restart = vec![7];
    assert_eq!(reason(&s), ("client".to_string(), 7, "no such component"));
    s.components[0].may_restart = vec![0];
    assert_eq!(reason(&s), ("client".to_string(), 0, "a component cannot restart itself"));
    s.components[0].may_restart = vec![2];
    assert_eq!(reason(&s), ("client".to_string(), 2, "it is not restartable"));
    s.components[0].may_restart = vec![1, 1];
    assert_eq!(reason(&s), ("client".to_string(), 1, "listed twice"));
    assert_eq!(s.validate().unwrap_err().to_string(), "component 'client' may restart component #1: listed twice");
    s.components[0].may_restart = vec![1];
    assert_eq!(s.validate(), Ok(()));
    // The grant survives encoding.
    let back = SystemSpec::decode(&s.encode().unwrap()).unwrap();
    assert_eq!(back.components[0].may_restart, vec![1]);
}

/// The sample's driver with its registers, ports and interrupt as those
/// of the PCI function the loader binds to it at boot.
fn found_at_boot(s: &mut SystemSpec) {
    s.objects[2].kind = ObjectKind::PciBarFrames { driver: "driver".to_string(), bar: 0, size: PAGE_SIZE };
    s.objects[4].kind =
        ObjectKind::PciIrq(PciIrq { driver: "driver".to_string(), vector: 20, notification: ObjectId(3), badge: 1 });
    s.objects[5].kind = ObjectKind::PciBarPorts { driver: "driver".to_string(), bar: 1 };
    s.components.iter_mut().find(|c| c.name == "driver").unwrap().pci_match = Some("net".to_string());
}

#[test]
fn devices_found_at_boot_need_a_driver_with_a_match() {
    let mut spec = sample();
    found_at_boot(&mut spec);
    spec.validate().unwrap();
    let bytes = spec.encode().unwrap();
    assert_eq!(SystemSpec::decode(&bytes).unwrap(), spec);
    let msg = invalid(|s| {
        found_at_boot(s);
        s.components.iter_mut().find(|c| c.name == "driver").unwrap().pci_match = None;
    });
    assert!(msg.contains("'uart_mmio': its driver is no component with a match"), "{msg}");
    let msg = invalid(|s| {
        found_at_boot(s);
        s.objects[5].kind = ObjectKind::PciBarPorts { driver: "driver".to_string(), bar: 6 };
    });
    assert!(msg.contains("BAR number must be 0..=5"), "{msg}");
    let msg = invalid(|s| {
        found_at_boot(s);
        s.objects[2].kind = ObjectKind::PciBarFrames { driver: "nobody".to_string(), bar: 0, size: PAGE_SIZE };
    });
    assert!(msg.contains("its driver is no component with a match"), "{msg}");
    let msg = invalid(|s| {
        found_at_boot(s);
        if let ObjectKind::PciIrq(irq) = &mut s.objects[4].kind {
            irq.notification = ObjectId(0);
        }
    });
    assert!(msg.contains("must signal a notification"), "{msg}");
    let msg = invalid(|s| {
        found_at_boot(s);
        s.add_object(
            "other.irq",
            ObjectKind::PciIrq(PciIrq {
                driver: "driver".to_string(),
                vector: 20,
                notification: ObjectId(3),
                badge: 1,
            }),
        );
    });
    assert!(msg.contains("vector 20 is used twice"), "{msg}");
}
