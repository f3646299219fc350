*** Settings ***
Documentation       The pages people look at, in a real browser: `/`, `/live.html` and
...                 `/cgi-bin/stats` in headless Chromium at a phone's width (390 px) and
...                 a desktop's (1280 px), while two clients download the 1 MiB file over
...                 and over. No page scrolls sideways or has an element outside the
...                 viewport, and the live chart's axis labels (the boxes its layout code
...                 publishes on the canvas, see site/live.js) stay inside the canvas
...                 without overlapping, with the wide values the load makes (a fixed
...                 margin once cut "488.3 KiB/s" to "88.3 KiB/s"). tests/lib/Browser.py
...                 drives Chromium over the DevTools Protocol.
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Library             Browser
Suite Setup         Boot Load And Browse
Suite Teardown      Run Keywords    Stop Browser    AND    Stop System
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${PORT}             8080
${BASE}             http://127.0.0.1:${PORT}
# The top left label once the load has moved it off the idle floor
# ("2.0 KiB/s"): several KiB/s at least, up to GiB/s.
${LOADED}           (?!2\\.0 KiB)\\d+(\\.\\d)? (KiB|MiB|GiB)/s
${CHART_READY}      (() => { const d = document.getElementById("chart").dataset.labels; if (!d) return false; const l = JSON.parse(d).labels.filter(b => b.text.endsWith("/s")); return l.length > 0 && new RegExp(String.raw`^${LOADED}$`).test(l.reduce((a, b) => a.y < b.y ? a : b).text); })()

*** Test Cases ***
The Home Page Fits A Phone And A Desktop
    FOR    ${width}    IN    390    1280
        Open Page    ${BASE}/    ${width}
        Page Should Fit Its Width
    END

The Counters Page Fits A Phone And A Desktop
    FOR    ${width}    IN    390    1280
        Open Page    ${BASE}/cgi-bin/stats    ${width}
        Page Should Fit Its Width
    END

The Live Chart's Labels Fit A Phone And A Desktop Under Load
    FOR    ${width}    IN    390    1280
        Open Page    ${BASE}/live.html    ${width}    ready=${CHART_READY}    timeout=40
        Page Should Fit Its Width
        Chart Labels Should Fit    ${LOADED}
    END
    ${n}=    Stop Load
    Should Be True    ${n} > 0    the load completed no request

*** Keywords ***
Boot Load And Browse
    Start System    --port    ${PORT}:80    --disk    ${BUILD_DIR}/images/site.img
    Wait For Web Server    timeout=120
    Start Load    ${BASE}/file-1m.bin    2
    Start Browser
