Feature: Listen Task
  As a convoke workflow author
  I want listen tasks to wait for CloudEvents delivered to the instance
  So that workflows can react to events, each taken once and only after it is recorded

  Scenario: Listen To One With Correlation
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: listen-one
      version: '1.0.0'
    do:
      - waitForPayment:
          listen:
            to:
              one:
                with:
                  type: com.example.order.paid
                correlate:
                  order:
                    from: ${ .data.orderId }
                    expect: ${ .orderId }
    """
    And given the workflow input is:
    """yaml
    orderId: o-1
    """
    When the workflow is started
    And the event is delivered:
    """yaml
    specversion: '1.0'
    id: e1
    source: https://shop.example
    type: com.example.order.paid
    data: { orderId: o-2 }
    """
    Then the delivery should match nothing
    When the event is delivered:
    """yaml
    specversion: '1.0'
    id: e2
    source: https://shop.example
    type: com.example.order.paid
    data: { orderId: o-1, amount: 5 }
    """
    Then the delivery should be accepted
    And the workflow should complete with output:
    """yaml
    - orderId: o-1
      amount: 5
    """

  Scenario: Listen To All
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: listen-all
      version: '1.0.0'
    do:
      - callDoctor:
          listen:
            to:
              all:
                - with:
                    type: com.fake-hospital.vitals.measurements.temperature
                    data: ${ .temperature > 38 }
                - with:
                    type: com.fake-hospital.vitals.measurements.bpm
                    data: ${ .bpm < 60 or .bpm > 100 }
    """
    When the workflow is started
    And the event is delivered:
    """yaml
    specversion: '1.0'
    id: v1
    source: https://hospital.example
    type: com.fake-hospital.vitals.measurements.bpm
    data: { bpm: 120 }
    """
    Then the delivery should be accepted
    When the event is delivered:
    """yaml
    specversion: '1.0'
    id: v2
    source: https://hospital.example
    type: com.fake-hospital.vitals.measurements.temperature
    data: { temperature: 37 }
    """
    Then the delivery should match nothing
    When the event is delivered:
    """yaml
    specversion: '1.0'
    id: v3
    source: https://hospital.example
    type: com.fake-hospital.vitals.measurements.temperature
    data: { temperature: 39 }
    """
    Then the delivery should be accepted
    And the workflow should complete with output:
    """yaml
    - bpm: 120
    - temperature: 39
    """

  Scenario: Listen To Any Until Consumed
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: listen-until-consumed
      version: '1.0.0'
    do:
      - watch:
          listen:
            to:
              any:
                - with:
                    type: com.example.reading
              until:
                one:
                  with:
                    type: com.example.done
    """
    When the workflow is started
    And the event is delivered:
    """yaml
    specversion: '1.0'
    id: r1
    source: https://sensor.example
    type: com.example.reading
    data: 1
    """
    And the event is delivered:
    """yaml
    specversion: '1.0'
    id: d1
    source: https://sensor.example
    type: com.example.done
    """
    Then the workflow should complete with output:
    """yaml
    - 1
    """

  Scenario: Listen To Any Until Condition
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: listen-until-condition
      version: '1.0.0'
    do:
      - watch:
          listen:
            to:
              any: []
              until: ( . | length ) > 1
    """
    When the workflow is started
    And the event is delivered:
    """yaml
    specversion: '1.0'
    id: c1
    source: https://sensor.example
    type: com.example.anything
    data: a
    """
    And the event is delivered:
    """yaml
    specversion: '1.0'
    id: c2
    source: https://sensor.example
    type: com.example.anything
    data: b
    """
    Then the workflow should complete with output:
    """yaml
    - a
    - b
    """

  Scenario: Listen With A Timeout
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: listen-timeout
      version: '1.0.0'
    do:
      - waitForNothing:
          listen:
            to:
              one:
                with:
                  type: com.example.never
          timeout:
            after:
              milliseconds: 200
    """
    When the workflow is executed
    Then the workflow should fault with status 408

  Scenario: Listen With Foreach Runs Its Tasks On Each Event As It Is Taken
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: listen-foreach
      version: '1.0.0'
    do:
      - readings:
          listen:
            to:
              any:
                - with:
                    type: com.example.reading
              until: ( . | length ) >= 2
          foreach:
            item: reading
            at: i
            do:
              - scale:
                  set:
                    value: ${ $reading.n * 10 }
                    at: ${ $i }
            output:
              as: .value
    """
    When the workflow is started
    And the event is delivered:
    """yaml
    specversion: '1.0'
    id: r1
    source: https://sensors.example
    type: com.example.reading
    data: { n: 1 }
    """
    Then the delivery should be accepted
    When the event is delivered:
    """yaml
    specversion: '1.0'
    id: r2
    source: https://sensors.example
    type: com.example.reading
    data: { n: 2 }
    """
    Then the delivery should be accepted
    And the workflow should complete with output:
    """yaml
    [ 10, 20 ]
    """
    And scale should complete

  Scenario: Listen With Foreach Shapes Each Iteration With An Object Output
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: listen-foreach-object
      version: '1.0.0'
    do:
      - readings:
          listen:
            to:
              one:
                with:
                  type: com.example.reading
          foreach:
            item: reading
            at: i
            do:
              - scale:
                  set:
                    value: ${ $reading.n * 10 }
            output:
              as:
                scaled: ${ .value }
                index: ${ $i }
    """
    When the workflow is started
    And the event is delivered:
    """yaml
    specversion: '1.0'
    id: r1
    source: https://sensors.example
    type: com.example.reading
    data: { n: 3 }
    """
    Then the delivery should be accepted
    And the workflow should complete with output:
    """yaml
    [ { scaled: 30, index: 0 } ]
    """
